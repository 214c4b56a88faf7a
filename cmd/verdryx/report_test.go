package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/report/fixture"
	"github.com/verdryx/verdryx/store"
)

func TestReportMissingStoreIsUsageError(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.db")
	_, stderr, code := runCLI(t, "report", "--db", missing, "--out", filepath.Join(dir, "r.html"))
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--db")
	assert.Contains(t, stderr, missing)
	_, err := os.Stat(missing)
	assert.ErrorIs(t, err, os.ErrNotExist, "the report never creates a store")
	_, err = os.Stat(filepath.Join(dir, "r.html"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing written")
}

func TestReportBadFlags(t *testing.T) {
	cleanEvalEnv(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "v.db")
	st, err := store.Open(context.Background(), db, store.Options{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	_, stderr, code := runCLI(t, "report", "--db", db, "--since", "yesterday")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "--since")
	_, stderr, code = runCLI(t, "report", "--db", db, "--traces", filepath.Join(dir, "no-such-dir"), "--out", filepath.Join(dir, "r.html"))
	assert.Equal(t, exitUsage, code, stderr)
	_, stderr, code = runCLI(t, "report", "--db", db, "extra")
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr, "unexpected argument")
}

// sampleStore writes a small fixture store and returns its path.
func sampleStore(t *testing.T) (string, fixture.Facts) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "v.db")
	st, err := store.Open(context.Background(), db, store.Options{})
	require.NoError(t, err)
	facts, err := fixture.Populate(context.Background(), st, fixture.Spec{Runs: 6, Cases: 8, Regress: 4, UnmeasuredCase: true, UnmeasuredRun: -1})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	return db, facts
}

func TestReportWritesPage(t *testing.T) {
	cleanEvalEnv(t)
	db, facts := sampleStore(t)
	out := filepath.Join(t.TempDir(), "report.html")
	stdout, stderr, code := runCLI(t, "report", "--db", db, "--traces", "../../testdata/traces/slo", "--out", out)
	require.Equal(t, exitOK, code, stderr)
	assert.Contains(t, stdout, "wrote "+out)
	raw, err := os.ReadFile(out)
	require.NoError(t, err)
	page := string(raw)
	for _, id := range []string{`id="quality"`, `id="grid"`, `id="cost"`, `id="slo"`, `id="provenance"`} {
		assert.Contains(t, page, id)
	}
	assert.Contains(t, page, facts.RegressedRunID)
	assert.Contains(t, page, "$0.000226 per resolved outcome", "the slo fixture's cost per resolved outcome (testdata/traces/slo/expected.txt)")
	assert.NotContains(t, page, "<script")
	assert.NotContains(t, page, "https://")

	// --since after every run: the sections stay, saying there is nothing.
	out2 := filepath.Join(t.TempDir(), "empty.html")
	_, stderr, code = runCLI(t, "report", "--db", db, "--since", "2100-01-01", "--out", out2)
	require.Equal(t, exitOK, code, stderr)
	raw, err = os.ReadFile(out2)
	require.NoError(t, err)
	assert.Contains(t, string(raw), "no eval runs in the store since 2100-01-01")
	assert.Contains(t, string(raw), "not measured: no traces given")
}

// freeAddr returns a loopback address with a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return addr
}

// TestServeReport runs the worker with its HTTP listener, replays the slo
// trace fixture and reads GET /report next to /metrics: the page shows the
// cost of the consumed traces and is served from cache within the TTL.
func TestServeReport(t *testing.T) {
	cleanEvalEnv(t)
	data := t.TempDir()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var stdout, stderr bytes.Buffer
	go func() {
		done <- run(ctx, []string{"serve", "--data", data, "--nats-listen", "127.0.0.1:0", "--http", addr, "--rag-corpus", "",
			"--replay", "../../testdata/traces/slo"}, &stdout, &stderr)
	}()
	defer func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("serve did not stop")
		}
	}()
	client := &http.Client{Timeout: 10 * time.Second}
	get := func(path string) (int, string, http.Header) {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return 0, "", nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}
	// Poll until two renders (the page is cached for 5 s) show the same
	// cost headline: the replay has been consumed.
	headline := regexp.MustCompile(`id="cost-per-resolved">([^<]*)<`)
	generated := regexp.MustCompile(`generated (\S+) by`)
	var body, lastHead, lastGen string
	var hdr http.Header
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		code, b, h := get("/report")
		if code == http.StatusOK {
			hm, gm := headline.FindStringSubmatch(b), generated.FindStringSubmatch(b)
			if hm != nil && gm != nil && gm[1] != lastGen {
				if hm[1] == lastHead {
					body, hdr = b, h
					break
				}
				lastHead, lastGen = hm[1], gm[1]
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.NotEmpty(t, body, "GET /report never settled on a cost of the consumed traces")
	assert.Equal(t, "text/html; charset=utf-8", hdr.Get("Content-Type"))
	assert.Contains(t, hdr.Get("Content-Security-Policy"), "default-src 'none'")
	assert.True(t, strings.Contains(body, `id="slo"`) && strings.Contains(body, `class="chart slo"`), "the SLO section has its chart")
	_, again, _ := get("/report")
	assert.True(t, body == again, "served from cache within the TTL")
	code, metrics, _ := get("/metrics")
	assert.Equal(t, http.StatusOK, code)
	assert.Contains(t, metrics, "verdryx_messages_received_total")
	assert.Contains(t, metrics, "verdryx_partition_load_seconds_count", "partition loads are exported")
	assert.Contains(t, metrics, "process_resident_memory_bytes")
	resp, err := client.Post("http://"+addr+"/report", "text/plain", nil)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	// A window of whole UTC days: the calls of 2026-11-15 to 2026-11-28.
	code, windowed, _ := get("/report?from=2026-11-15&to=2026-11-28")
	require.Equal(t, http.StatusOK, code, windowed)
	assert.Contains(t, windowed, "calls from 2026-11-15T00:00:00Z to 2026-11-29T00:00:00Z")
	winHead := headline.FindStringSubmatch(windowed)
	require.NotNil(t, winHead)
	assert.NotEqual(t, lastHead, winHead[1], "the window holds a part of the calls")
	for q, want := range map[string]string{
		"/report?from=2026-11-15T06:00:00Z": "keeps whole", // calls of November: kept by the day
		"/report?from=2026-11-15T06:30:00Z": "on the hour",
		"/report?last=soon":                 `last "soon"`,
		"/report?last=2d&from=2026-11-15":   "give it alone",
		"/report?to=yesterday":              `to "yesterday"`,
	} {
		code, b, _ := get(q)
		assert.Equal(t, http.StatusBadRequest, code, q)
		assert.Contains(t, b, want, q)
	}

	// The headline is the cost per resolved outcome of the replayed calls
	// (their direct reduction).
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("serve: %v", err)
	}
	done <- nil // for the deferred wait
	all, _, code := runCLI(t, "cost-per-correct", "--traces", "../../testdata/traces/slo", "--json")
	require.Equal(t, 0, code)
	var allRep outcome.Report
	require.NoError(t, json.Unmarshal([]byte(all), &allRep))
	g := allRep.Groups[0]
	require.NotNil(t, g.CostPerResolvedUSD)
	assert.Equal(t, fmt.Sprintf("$%.6f per resolved outcome", *g.CostPerResolvedUSD), strings.SplitN(lastHead, " (", 2)[0])
	// The windowed page's headline is the direct reduction of the window.
	direct, _, code := runCLI(t, "cost-per-correct", "--traces", "../../testdata/traces/slo", "--from", "2026-11-15", "--to", "2026-11-28", "--json")
	require.Equal(t, 0, code)
	var rep outcome.Report
	require.NoError(t, json.Unmarshal([]byte(direct), &rep))
	require.NotNil(t, rep.Groups[0].CostPerResolvedUSD)
	assert.Equal(t, fmt.Sprintf("$%.6f per resolved outcome", *rep.Groups[0].CostPerResolvedUSD), strings.SplitN(winHead[1], " (", 2)[0])
}
