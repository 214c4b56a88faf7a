package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag/golden"
	"github.com/verdryx/verdryx/ragask"
)

const (
	ragCorpusPath = "../../testdata/grimoire/corpus.json"
	ragGoldenPath = "../../testdata/grimoire/golden.json"
)

func ragRun(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	err := run(context.Background(), args, &out, &errb)
	code = report(err, &errb)
	return out.String(), errb.String(), code
}

// TestAskFromAnotherDirectory: the generation records its corpus, so ask
// after index build needs no --corpus and no repository checkout: it runs
// from an unrelated working directory against a temporary data directory,
// and answers as ask --corpus does. Without an index, ask names the fix.
func TestAskFromAnotherDirectory(t *testing.T) {
	corpus, err := filepath.Abs(ragCorpusPath)
	require.NoError(t, err)
	data := t.TempDir()
	const question = "What quantity of pearl salt and which vapor are specified for ground moonpetal?"
	_, errOut, code := ragRun(t, "index", "build", "--corpus", corpus, "--data", data)
	require.Equal(t, exitOK, code, errOut)
	withCorpus, errOut, code := ragRun(t, "ask", "--json", "--corpus", corpus, "--data", data, question)
	require.Equal(t, exitOK, code, errOut)

	t.Chdir(t.TempDir())
	out, errOut, code := ragRun(t, "ask", "--json", "--data", data, question)
	require.Equal(t, exitOK, code, errOut)
	assert.JSONEq(t, withCorpus, out)
	assert.Contains(t, out, "11 grains")

	_, errOut, code = ragRun(t, "ask", "--data", t.TempDir(), question)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no active generation")
	assert.Contains(t, errOut, "verdryx index build --corpus FILE")
	_, errOut, code = ragRun(t, "index", "build", "--data", data)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--corpus is required")
	_, errOut, code = ragRun(t, "ask", "--memory", "--data", data, question)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "--memory needs --corpus")
}

func TestIndexBuildListAskGC(t *testing.T) {
	data := t.TempDir()
	out, errOut, code := ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
	require.Equal(t, 0, code, errOut)
	first := regexp.MustCompile(`generation ([0-9a-f]{32}) active`).FindStringSubmatch(out)
	require.NotNil(t, first, out)

	out, errOut, code = ragRun(t, "ask", "--json", "--corpus", ragCorpusPath, "--data", data,
		"What quantity of pearl salt and which vapor are specified for ground moonpetal?")
	require.Equal(t, 0, code, errOut)
	var rec struct {
		RetrievedIDs    []string `json:"retrieved_ids"`
		Answer          string   `json:"answer"`
		IndexGeneration string   `json:"index_generation"`
		ContextPayload  string   `json:"context_payload"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, []string{"moonpetal-silver-vapor", "moonflower-golden-vapor"}, rec.RetrievedIDs)
	assert.Equal(t, first[1], rec.IndexGeneration)
	assert.Contains(t, rec.Answer, "11 grains")
	assert.Contains(t, rec.ContextPayload, "[CONTEXT id=moonpetal-silver-vapor grimoire_id='GRIM-NOCTURNE' folio='IV-a']")

	out, _, code = ragRun(t, "ask", "--corpus", ragCorpusPath, "--data", data, "How long does moonpetal dew bottled with pearl salt keep on the shelf before it spoils?")
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "INSUFFICIENT_CONTEXT\n\nsources (vector retrieval, generation "+first[1]+"):\n  1. "), out)

	for range 2 {
		out, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
		require.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "generation "+first[1]+" reused", "same corpus and embedder: no new generation")
	}
	out, _, code = ragRun(t, "index", "ls", "--data", data)
	require.Equal(t, 0, code)
	assert.Equal(t, 2, strings.Count(out, "\n"), out) // header + 1 generation
	assert.Regexp(t, `\svector\s`, out, "a --corpus index ranks by vector")
	out, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data, "--force")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "reused")
	assert.NotContains(t, out, first[1], "--force builds a new generation")
	out, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "reused")
	out, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data, "--dims", "512")
	require.Equal(t, 0, code, errOut)
	assert.NotContains(t, out, "reused", "another embedder model: a new generation")
	// Back to the default embedder for the ask below the gc.
	out, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data, "--force")
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "reused")
	out, _, code = ragRun(t, "index", "ls", "--data", data)
	require.Equal(t, 0, code)
	assert.Equal(t, 5, strings.Count(out, "\n"), out) // header + 4 generations
	assert.Equal(t, 1, strings.Count(out, "*"))

	out, _, code = ragRun(t, "index", "gc", "--keep", "0", "--data", data)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "3 generation(s) removed")
	out, _, _ = ragRun(t, "index", "ls", "--data", data)
	assert.Equal(t, 2, strings.Count(out, "\n"), out)
}

func TestAskRefusesMissingOrStaleIndex(t *testing.T) {
	data := t.TempDir()
	_, errOut, code := ragRun(t, "ask", "--corpus", ragCorpusPath, "--data", data, "anything?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "no active generation")
	assert.Contains(t, errOut, "verdryx index build")

	_, errOut, code = ragRun(t, "index", "build", "--corpus", ragCorpusPath, "--data", data)
	require.Equal(t, 0, code, errOut)
	b, err := os.ReadFile(ragCorpusPath)
	require.NoError(t, err)
	edited := filepath.Join(t.TempDir(), "corpus.json")
	require.NoError(t, os.WriteFile(edited, bytes.Replace(b, []byte("11 grains"), []byte("12 grains"), 1), 0o644))
	_, errOut, code = ragRun(t, "ask", "--corpus", edited, "--data", data, "anything?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "stale generation")

	_, errOut, code = ragRun(t, "ask", "--corpus", ragCorpusPath, "--data", data, "--dims", "512", "anything?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "was built with embedder")

	_, errOut, code = ragRun(t, "ask", "--memory", "--embedder", "bogus", "--corpus", ragCorpusPath, "q?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, `--embedder "bogus"`)
}

// TestMutateKillsEveryMutantOfShippedSets requires 100% kill, every
// mutation class present, on both shipped sets and on the reviewer's kiln
// set (a third domain the graders were not written against), given as the
// EVALSET eval takes.
func TestMutateKillsEveryMutantOfShippedSets(t *testing.T) {
	for _, set := range []string{"../../testdata/grimoire/evalset.json", "../../testdata/lighthouse/evalset.json", "../../grading/testdata/kiln/evalset.json"} {
		out, errOut, code := ragRun(t, "mutate", set)
		require.Equal(t, 0, code, errOut+out)
		assert.Regexp(t, `\d+ cases, (\d+) mutants: \d+ killed, 0 survived \(sensitivity 100\.0%\); [1-9]\d* controls: \d+ passed, 0 failed \(specificity 100\.0%\); 0 cases failing unmutated`, out)
		assert.NotContains(t, out, "SURVIVED")
		assert.NotContains(t, out, "CONTROL FAILS")
		for _, name := range golden.ControlNames() {
			m := regexp.MustCompile(regexp.QuoteMeta(name) + ` (\d+)/(\d+)`).FindStringSubmatch(out[strings.Index(out, "controls passed by class:"):])
			if assert.NotNil(t, m, "%s: control class %s", set, name) {
				assert.Equal(t, m[2], m[1], "%s: control class %s not all passed", set, name)
			}
		}
		for _, name := range golden.MutationNames() {
			assert.Regexp(t, regexp.MustCompile(regexp.QuoteMeta(name)+` (\d+)/(\d+)`), out, "%s: class %s", set, name)
			m := regexp.MustCompile(regexp.QuoteMeta(name) + ` (\d+)/(\d+)`).FindStringSubmatch(out)
			if m != nil {
				assert.Equal(t, m[2], m[1], "%s: class %s not fully killed", set, name)
			}
		}

		out, _, code = ragRun(t, "mutate", "--json", set)
		require.Equal(t, 0, code)
		var rep struct {
			Mutants, Killed, Survived int
			Classes                   map[string]map[string]int
			Sensitivity               float64
			Controls                  int
			ControlsPassed            int `json:"controls_passed"`
			Specificity               float64
			FailingControls           []any `json:"failing_controls"`
		}
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		assert.Positive(t, rep.Mutants)
		assert.Equal(t, rep.Mutants, rep.Killed)
		assert.Zero(t, rep.Survived)
		assert.Len(t, rep.Classes, len(golden.MutationNames()))
		assert.Positive(t, rep.Controls)
		assert.Equal(t, rep.Controls, rep.ControlsPassed)
		assert.Equal(t, 1.0, rep.Sensitivity)
		assert.Equal(t, 1.0, rep.Specificity)
		assert.Empty(t, rep.FailingControls)
	}
	// The --corpus/--golden form still works.
	out, errOut, code := ragRun(t, "mutate", "--corpus", ragCorpusPath, "--golden", ragGoldenPath)
	require.Equal(t, 0, code, errOut+out)
	assert.Contains(t, out, " 0 survived")
}

// TestMutateNamesSurvivorsOfWeakSet weakens one case (no forbidden values
// or literals): the sibling's own number cited to the sibling then passes
// every check, and mutate must exit 1 naming it.
func TestMutateNamesSurvivorsOfWeakSet(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"corpus.json", "evalset.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("../../testdata/grimoire", f))
		require.NoError(t, err)
		if f == "golden.json" {
			var g map[string]any
			require.NoError(t, json.Unmarshal(b, &g))
			for _, c := range g["cases"].([]any) {
				if c := c.(map[string]any); c["case_id"] == "conditional-shadeglass-direct-sun" {
					delete(c, "forbidden_values")
					delete(c, "forbidden")
				}
			}
			b, err = json.Marshal(g)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	for _, args := range [][]string{
		{"mutate", filepath.Join(dir, "evalset.json")},
		{"mutate", "--corpus", filepath.Join(dir, "corpus.json"), "--golden", filepath.Join(dir, "golden.json")},
	} {
		out, _, code := ragRun(t, args...)
		assert.Equal(t, exitFailure, code, out)
		assert.Regexp(t, `conditional-shadeglass-direct-sun\s+wrong-chunk-attribution\s+10 moon-phases from \[sunspire-orchid-harvest\]\s+SURVIVED`, out)
		assert.Contains(t, out, "survivor: conditional-shadeglass-direct-sun wrong-chunk-attribution (10 moon-phases from [sunspire-orchid-harvest])")
		assert.Regexp(t, `[1-9]\d* survived`, out)
	}
	out, _, code := ragRun(t, "mutate", "--json", filepath.Join(dir, "evalset.json"))
	assert.Equal(t, exitFailure, code)
	var rep struct {
		Survivors []struct {
			CaseID   string `json:"case_id"`
			Mutation string `json:"mutation"`
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.NotEmpty(t, rep.Survivors)
	assert.Equal(t, "conditional-shadeglass-direct-sun", rep.Survivors[0].CaseID)
	assert.Equal(t, golden.MutWrongChunk, rep.Survivors[0].Mutation)
}

// copyLighthouse copies the lighthouse set into a temporary directory,
// letting edit change the golden case case_id, and returns the eval-set
// path.
func copyLighthouse(t *testing.T, caseID string, edit func(map[string]any)) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{"corpus.json", "evalset.json", "golden.json"} {
		b, err := os.ReadFile(filepath.Join("../../testdata/lighthouse", f))
		require.NoError(t, err)
		if f == "golden.json" {
			var g map[string]any
			require.NoError(t, json.Unmarshal(b, &g))
			for _, c := range g["cases"].([]any) {
				if c := c.(map[string]any); c["case_id"] == caseID {
					edit(c)
				}
			}
			b, err = json.Marshal(g)
			require.NoError(t, err)
		}
		require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
	}
	return filepath.Join(dir, "evalset.json")
}

// TestMutateNamesFailingControls over-specifies one case's wording (a
// must_contain phrase only the chunk's own word order holds): the set
// still passes its evidence, but the prepositional control fails, and
// mutate must exit 1 naming it, with specificity under 100%.
func TestMutateNamesFailingControls(t *testing.T) {
	set := copyLighthouse(t, "numeric-source-harbor-clamp", func(c map[string]any) {
		c["must_contain"] = append(c["must_contain"].([]any), "torques each fresnel lens clamp")
	})
	out, errOut, code := ragRun(t, "mutate", set)
	assert.Equal(t, exitFailure, code, errOut+out)
	assert.Regexp(t, `numeric-source-harbor-clamp\s+control prepositional-subject\s+.*CONTROL FAILS\s+must_contain`, out)
	assert.Contains(t, out, "failing control: numeric-source-harbor-clamp prepositional-subject (clamp of the fresnel lens) failed must_contain")
	assert.Regexp(t, `0 survived \(sensitivity 100\.0%\); \d+ controls: \d+ passed, [1-9]\d* failed \(specificity \d+\.\d%\)`, out)

	out, _, code = ragRun(t, "mutate", "--json", set)
	assert.Equal(t, exitFailure, code)
	var rep struct {
		Specificity     float64
		FailingControls []struct {
			CaseID  string `json:"case_id"`
			Control string `json:"control"`
		} `json:"failing_controls"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Less(t, rep.Specificity, 1.0)
	require.NotEmpty(t, rep.FailingControls)
	assert.Contains(t, rep.FailingControls, struct {
		CaseID  string `json:"case_id"`
		Control string `json:"control"`
	}{"numeric-source-harbor-clamp", golden.CtlPrepositional})
}

// TestEvalRefusesSetFailingItsEvidence forbids a phrase the expected chunk
// itself states: eval and mutate must refuse the set as an input error
// naming the case and the check, not grade a model with it.
func TestEvalRefusesSetFailingItsEvidence(t *testing.T) {
	set := copyLighthouse(t, "numeric-source-harbor-clamp", func(c map[string]any) {
		c["forbidden"] = append(c["forbidden"].([]any), "lamp room")
	})
	for _, args := range [][]string{{"eval", "--db", filepath.Join(t.TempDir(), "s.db"), set}, {"mutate", set}} {
		out, errOut, code := ragRun(t, args...)
		assert.Equal(t, exitUsage, code, "%v: %s%s", args, out, errOut)
		assert.Contains(t, errOut, `"numeric-source-harbor-clamp"`, "%v", args)
		assert.Contains(t, errOut, "fail their own evidence", "%v", args)
		assert.Contains(t, errOut, golden.CheckForbiddenAbsent, "%v", args)
	}
}

func TestBenchIndexSmall(t *testing.T) {
	out, errOut, code := ragRun(t, "bench", "index", "--n", "200,50", "--dim", "32", "--reps", "3", "--batch", "4")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(out, "\n")
	require.GreaterOrEqual(t, len(lines), 6)
	assert.Regexp(t, `^kernels: float32 \S+ \(every score\), int8 \S+ `, lines[1])
	assert.NotContains(t, lines[1], "int8 none")
	assert.Regexp(t, `^\s+50\s`, lines[4], "sizes run ascending")
	assert.Regexp(t, `^\s+200\s`, lines[5])
	_, _, code = ragRun(t, "bench", "index", "--n", "x")
	assert.Equal(t, exitUsage, code)
}

// TestOpenAIProvidersByFlag wires --embedder openai and --generator openai
// to a fake OpenAI-compatible server: the key comes from OPENAI_API_KEY,
// the generation records the provider's model, and the answer is kept
// verbatim.
func TestOpenAIProvidersByFlag(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-fake")
	hash := hashembed.New(64)
	var embedCalls, chatCalls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer sk-fake" {
			http.Error(w, `{"error":{"message":"no key"}}`, http.StatusUnauthorized)
			return
		}
		var req struct {
			Input []string `json:"input"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		switch r.URL.Path {
		case "/v1/embeddings":
			embedCalls.Add(1)
			vecs, _ := hash.Embed(r.Context(), req.Input)
			var data []map[string]any
			for i, v := range vecs {
				data = append(data, map[string]any{"index": i, "embedding": v})
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"data": data})
		case "/v1/chat/completions":
			chatCalls.Add(1)
			io.WriteString(w, `{"choices":[{"message":{"content":"INSUFFICIENT_CONTEXT"}}]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	data := t.TempDir()
	flags := []string{"--data", data, "--corpus", ragCorpusPath, "--embedder", "openai", "--openai-base-url", srv.URL + "/v1", "--embed-model", "fake-embed"}
	out, errOut, code := ragRun(t, append([]string{"index", "build"}, flags...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "embedder openai/fake-embed")
	assert.Equal(t, int64(1), embedCalls.Load(), "the corpus is embedded in one request")

	out, errOut, code = ragRun(t, append([]string{"ask", "--json", "--generator", "openai", "--gen-model", "fake-chat", "What quantity of pearl salt and which vapor are specified for ground moonpetal?"}, flags...)...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, int64(2), embedCalls.Load())
	assert.Equal(t, int64(1), chatCalls.Load())
	assert.Contains(t, out, `"answer": "INSUFFICIENT_CONTEXT"`)
	assert.Contains(t, out, `"generator": "openai-chat/fake-chat"`)

	// The offline embedder, named, is refused against this generation
	// before any call.
	_, errOut, code = ragRun(t, "ask", "--data", data, "--corpus", ragCorpusPath, "--embedder", "offline", "anything?")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "was built with embedder openai/fake-embed")
	assert.Equal(t, int64(2), embedCalls.Load())

	t.Setenv("OPENAI_API_KEY", "")
	_, errOut, code = ragRun(t, "index", "build", "--data", data, "--corpus", ragCorpusPath, "--embedder", "openai")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "OPENAI_API_KEY is not set")
}

// TestAskRetrievalTopKFilter: index build --retrieval hybrid records the
// mode, ask honours it, --top-k and --filter; ask prints the answer and
// each source by default and the full record, chunks with their metadata,
// with --json. Bad flags are usage errors naming what was wrong.
func TestAskRetrievalTopKFilter(t *testing.T) {
	data := t.TempDir()
	corpus := "../../rag/testdata/retrieval/corpus.json"
	out, errOut, code := ragRun(t, "index", "build", "--corpus", corpus, "--data", data, "--retrieval", "hybrid")
	require.Equal(t, exitOK, code, errOut)
	assert.Contains(t, out, "retrieval hybrid")
	out, errOut, code = ragRun(t, "index", "build", "--corpus", corpus, "--data", data, "--retrieval", "vector")
	require.Equal(t, exitOK, code, errOut)
	assert.NotContains(t, out, "reused", "another retrieval is another generation")
	_, errOut, code = ragRun(t, "index", "build", "--corpus", corpus, "--data", data, "--retrieval", "hybrid")
	require.Equal(t, exitOK, code, errOut)

	const q = "How long do the batteries last?"
	out, errOut, code = ragRun(t, "ask", "--data", data, "--top-k", "3", q)
	require.Equal(t, exitOK, code, errOut)
	assert.Regexp(t, `(?s)^.+ \[[a-z-]+\] \(source: manual/[a-z]+\.md\)\n\nsources \(hybrid retrieval, generation [0-9a-f]{32}\):\n`, out)
	assert.Equal(t, 3, strings.Count(out, "  score "), out)
	assert.Contains(t, out, "manual/lock.md  § Smart lock > Battery")

	out, errOut, code = ragRun(t, "ask", "--data", data, "--json", "--top-k", "5", "--filter", "source=manual/thermostat.md", "--filter", "headings=Battery", q)
	require.Equal(t, exitOK, code, errOut)
	var rec struct {
		Retrieval string            `json:"retrieval"`
		Filter    map[string]string `json:"filter"`
		Chunks    []struct {
			ID       string         `json:"id"`
			Score    float64        `json:"score"`
			Metadata map[string]any `json:"metadata"`
		} `json:"retrieved_chunks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rec))
	assert.Equal(t, "hybrid", rec.Retrieval)
	assert.Equal(t, map[string]string{"source": "manual/thermostat.md", "headings": "Battery"}, rec.Filter)
	require.Len(t, rec.Chunks, 1)
	assert.Equal(t, "thermo-battery", rec.Chunks[0].ID)
	assert.Equal(t, "manual/thermostat.md", rec.Chunks[0].Metadata["source"])
	assert.Equal(t, []any{"Thermostat", "Battery"}, rec.Chunks[0].Metadata["headings"])
	assert.Positive(t, rec.Chunks[0].Score)

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ask", "--data", data, "--filter", "colour=red", q}, `key "colour": no chunk has it`},
		{[]string{"ask", "--data", data, "--filter", "source", q}, `--filter "source": want key=value`},
		{[]string{"ask", "--data", data, "--filter", "source=a", "--filter", "source=b", q}, `key "source" given twice`},
		{[]string{"ask", "--data", data, "--filter", "source=nope.md", q}, "no chunk matches source=nope.md"},
		{[]string{"ask", "--data", data, "--top-k", "0", q}, "--top-k 0: want 1 to 20"},
		{[]string{"ask", "--data", data, "--top-k", "21", q}, "--top-k 21: want 1 to 20"},
		{[]string{"index", "build", "--corpus", corpus, "--data", data, "--retrieval", "bm25"}, `--retrieval: retrieval "bm25": want vector or hybrid`},
	} {
		_, errOut, code := ragRun(t, tc.args...)
		assert.Equal(t, exitUsage, code, "%v: %s", tc.args, errOut)
		assert.Contains(t, errOut, tc.want, "%v", tc.args)
	}
}

// TestAskExportsItsSpan: with an OTLP collector named ($VERDRYX_OTLP_ENDPOINT
// or --otlp), ask records its span as the worker does, exported before the
// command returns; a collector that refuses is exit 3 after the answer.
func TestAskExportsItsSpan(t *testing.T) {
	cleanEvalEnv(t)
	var hits atomic.Int32
	var body atomic.Value
	refuse := atomic.Bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/traces" {
			hits.Add(1)
			body.Store(string(b))
		}
		if refuse.Load() {
			http.Error(w, "no", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer srv.Close()
	t.Setenv("VERDRYX_OTLP_ENDPOINT", srv.URL)
	stdout, stderr, code := runCLI(t, "ask", "--memory", "--corpus", ragCorpusPath, "--data", t.TempDir(), "What dose of verdigris elixir treats tarnish fever?")
	require.Equal(t, exitOK, code, stderr)
	assert.NotEmpty(t, stdout)
	assert.EqualValues(t, 1, hits.Load(), "the span was exported before ask returned")
	assert.Contains(t, body.Load(), ragask.SpanAsk)
	assert.NotContains(t, body.Load(), "tarnish fever", "the question stays out of the span")

	refuse.Store(true)
	stdout, stderr, code = runCLI(t, "ask", "--memory", "--corpus", ragCorpusPath, "--data", t.TempDir(), "--otlp", srv.URL, "What dose?")
	assert.Equal(t, exitService, code, stderr)
	assert.NotEmpty(t, stdout, "the answer is printed all the same")
	assert.Contains(t, stderr, "export spans")
}
