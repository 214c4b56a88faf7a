package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/ragask"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// lampsCorpus writes a corpus in which the Varn lighthouse keeper lights
// lamps lamps a night (chunk varn-<tag>), among unrelated entries, and
// returns its path.
func lampsCorpus(t *testing.T, tag string, lamps int) string {
	t.Helper()
	c := map[string]any{
		"id": "lamps-" + tag, "label_fields": []string{"source"}, "source_field": "source",
		"entries": []map[string]any{
			{"id": "varn-" + tag, "source": "log-" + tag, "text": fmt.Sprintf("The keeper of the Varn lighthouse lights %d lamps each night before the tide turns.", lamps)},
			{"id": "ostel-bakery-" + tag, "source": "guide-" + tag, "text": "The bakery in Ostel opens at dawn and sells rye loaves until noon."},
			{"id": "quarry-" + tag, "source": "survey-" + tag, "text": "The granite quarry north of Brill ships stone by barge every spring."},
		},
	}
	b, err := json.Marshal(c)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "corpus-"+tag+".json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// lampsQuestion is answered by the varn chunk of every lampsCorpus.
const lampsQuestion = `{"question":"How many lamps does the keeper of the Varn lighthouse light each night?","top_k":1}`

// serveFollow runs serve in-process on data against url with an HTTP
// listener, and returns its address and its log.
func serveFollow(t *testing.T, data, url string) (addr string, logs *syncBuf) {
	t.Helper()
	addr = freeAddr(t)
	logs = &syncBuf{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--data", data, "--nats", url, "--http", addr}, io.Discard, logs)
	}()
	t.Cleanup(func() { cancel(); require.NoError(t, <-done, "serve log:\n%s", logs.String()) })
	return addr, logs
}

// metricsOf is the worker's /metrics page, "" while it does not answer.
func metricsOf(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// activeGeneration is the generation data's index names active.
func activeGeneration(t *testing.T, data string) string {
	t.Helper()
	id, err := index.NewStore(data, index.StoreOptions{}).Active()
	require.NoError(t, err)
	return id
}

// askOnce asks once over NATS.
func askOnce(nc *nats.Conn, body string) (ragask.Reply, error) {
	var rep ragask.Reply
	m, err := nc.Request("verdryx.rag.ask", []byte(body), 10*time.Second)
	if err != nil {
		return rep, err
	}
	return rep, json.Unmarshal(m.Data, &rep)
}

// TestServeFollowsActiveGeneration is issue 54's worker criterion: a
// running worker answers from a newly activated generation within 10 s
// and names it in every reply (errors too) and on /metrics, logging the
// switch; asks running throughout the switch all succeed, each answered
// whole by one generation; a generation that does not open here leaves
// the old one serving, logged with why; and index gc keeps the
// generation the worker serves although it is no longer active, saying
// why, and removes it once the worker switched away.
func TestServeFollowsActiveGeneration(t *testing.T) {
	cleanEvalEnv(t)
	t.Setenv("OPENAI_API_KEY", "") // the worker has no key: an openai generation does not open in it
	data := t.TempDir()
	_, errOut, code := ragRun(t, "index", "build", "--data", data, "--corpus", lampsCorpus(t, "a", 7))
	require.Equal(t, exitOK, code, errOut)
	genA := activeGeneration(t, data)

	url, nc := natsServer(t)
	addr, logs := serveFollow(t, data, url)
	rep := askNATS(t, nc, lampsQuestion)
	require.Empty(t, rep.Error)
	assert.Equal(t, genA, rep.IndexGeneration)
	assert.Equal(t, genA, rep.Record.IndexGeneration)
	assert.Equal(t, []string{"varn-a"}, rep.Record.RetrievedIDs)
	assert.Contains(t, rep.Record.Answer, "7 lamps")
	require.Eventually(t, func() bool {
		return strings.Contains(metricsOf(addr), `verdryx_rag_generation_info{generation="`+genA+`"} 1`)
	}, 30*time.Second, 50*time.Millisecond, "the generation served is on /metrics")

	// A generation whose embedder this worker cannot rebuild (no key)
	// becomes active: the worker keeps serving A and says why.
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	fake := httptest.NewServer(&embedFake{hash: hashembed.New(64)})
	defer fake.Close()
	_, errOut, code = ragRun(t, "index", "build", "--data", data, "--corpus", lampsCorpus(t, "x", 9),
		"--embedder", "openai", "--embed-model", "fake-embed", "--openai-base-url", fake.URL+"/v1")
	require.Equal(t, exitOK, code, errOut)
	genX := activeGeneration(t, data)
	require.Eventually(t, func() bool {
		return strings.Contains(logs.String(), `msg="rag generation not served: it does not open" generation=`+genX+` serving=`+genA)
	}, 30*time.Second, 50*time.Millisecond, "serve log:\n%s", logs.String())
	assert.Contains(t, logs.String(), "OPENAI_API_KEY", "the log says why")
	rep = askNATS(t, nc, lampsQuestion)
	require.Empty(t, rep.Error)
	assert.Equal(t, genA, rep.IndexGeneration, "the old generation still serves")

	// gc keeps A, inactive but served, and says why.
	out, errOut, code := ragRun(t, "index", "gc", "--data", data, "--keep", "0")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "kept "+genA+" (leased: a running process (a worker) serves it)")
	assert.Contains(t, out, "0 generation(s) removed")
	require.DirExists(t, filepath.Join(data, "index", "generations", genA))
	rep = askNATS(t, nc, lampsQuestion)
	require.Empty(t, rep.Error)
	assert.Equal(t, genA, rep.IndexGeneration)

	// Askers ask without pause while B is built and activated.
	var (
		stopAsking atomic.Bool
		wg         sync.WaitGroup
		mu         sync.Mutex
		failures   []string
		answered   = map[string]int{}
	)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stopAsking.Load() {
				rep, err := askOnce(nc, lampsQuestion)
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case rep.Error != "" || rep.Record == nil:
					failures = append(failures, "reply error: "+rep.Error)
				default:
					gen := rep.IndexGeneration
					answered[gen]++
					// Answered whole by one generation.
					if gen != rep.Record.IndexGeneration ||
						(gen == genA) != (strings.Contains(rep.Record.Answer, "7 lamps") && rep.Record.RetrievedIDs[0] == "varn-a") {
						failures = append(failures, fmt.Sprintf("reply of %s retrieved %v: %q", gen, rep.Record.RetrievedIDs, rep.Record.Answer))
					}
				}
				mu.Unlock()
			}
		}()
	}
	_, errOut, code = ragRun(t, "index", "build", "--data", data, "--corpus", lampsCorpus(t, "b", 12))
	require.Equal(t, exitOK, code, errOut)
	genB := activeGeneration(t, data)
	activated := time.Now()
	jstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		rep, err := askOnce(nc, lampsQuestion)
		if err != nil {
			return err
		}
		if rep.IndexGeneration != genB {
			return fmt.Errorf("answered from %s, not %s", rep.IndexGeneration, genB)
		}
		return nil
	})
	t.Logf("a running worker answered from the generation activated %v ago", time.Since(activated).Round(time.Millisecond))
	// Keep asking a moment past the switch, then stop.
	jstest.CheckFor(t, 30*time.Second, 10*time.Millisecond, func() error {
		mu.Lock()
		defer mu.Unlock()
		if answered[genB] < 8 {
			return errors.New("askers have not yet had replies from B")
		}
		return nil
	})
	stopAsking.Store(true)
	wg.Wait()
	require.Empty(t, failures, "every ask during the switch succeeds, answered whole by one generation")
	assert.Positive(t, answered[genA], "asks ran before the switch")
	t.Logf("asks during the switch: %v", answered)

	rep = askNATS(t, nc, lampsQuestion)
	require.Empty(t, rep.Error)
	assert.Equal(t, genB, rep.IndexGeneration)
	assert.Equal(t, []string{"varn-b"}, rep.Record.RetrievedIDs)
	assert.Contains(t, rep.Record.Answer, "12 lamps")
	assert.Contains(t, logs.String(), `msg="rag generation switched" generation=`+genB)
	assert.Contains(t, logs.String(), `previous=`+genA)
	// An error reply names the generation too.
	rep = askNATS(t, nc, `{"question":"lamps?","filter":{"source":"nowhere"}}`)
	require.NotEmpty(t, rep.Error)
	assert.Equal(t, genB, rep.IndexGeneration)
	var info []string
	for _, line := range strings.Split(metricsOf(addr), "\n") {
		if strings.HasPrefix(line, "verdryx_rag_generation_info{") {
			info = append(info, line)
		}
	}
	assert.Equal(t, []string{`verdryx_rag_generation_info{generation="` + genB + `"} 1`}, info, "only the generation served is labelled")

	// A is no longer served: gc removes it (and X), keeping B.
	jstest.CheckFor(t, 30*time.Second, 20*time.Millisecond, func() error {
		out, errOut, code := ragRun(t, "index", "gc", "--data", data, "--keep", "0")
		if code != exitOK {
			return errors.New(errOut)
		}
		if _, err := os.Stat(filepath.Join(data, "index", "generations", genA)); err == nil {
			return fmt.Errorf("A is still there: %s", out)
		}
		return nil
	})
	require.NoDirExists(t, filepath.Join(data, "index", "generations", genX))
	rep = askNATS(t, nc, lampsQuestion)
	require.Empty(t, rep.Error)
	assert.Equal(t, genB, rep.IndexGeneration)
}

// TestServeAsksStartWhenAGenerationAppears: a worker started with no index
// generation does not answer asks (no responders) until one is
// activated, and then answers from it within 10 s.
func TestServeAsksStartWhenAGenerationAppears(t *testing.T) {
	cleanEvalEnv(t)
	data := t.TempDir()
	url, nc := natsServer(t)
	addr, logs := serveFollow(t, data, url)
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 30*time.Second, 50*time.Millisecond, "the worker is ready")
	assert.Contains(t, logs.String(), "rag asks disabled: no --rag-corpus and no index generation with a recorded corpus; enabled when one is activated")
	_, err := askOnce(nc, lampsQuestion)
	require.ErrorIs(t, err, nats.ErrNoResponders)

	_, errOut, code := ragRun(t, "index", "build", "--data", data, "--corpus", lampsCorpus(t, "a", 5))
	require.Equal(t, exitOK, code, errOut)
	gen := activeGeneration(t, data)
	var rep ragask.Reply
	jstest.CheckFor(t, 10*time.Second, 20*time.Millisecond, func() error {
		var err error
		rep, err = askOnce(nc, lampsQuestion)
		return err
	})
	require.Empty(t, rep.Error)
	assert.Equal(t, gen, rep.IndexGeneration)
	assert.Contains(t, rep.Record.Answer, "5 lamps")
	assert.Contains(t, metricsOf(addr), `verdryx_rag_generation_info{generation="`+gen+`"} 1`)
}
