package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/verdryx/verdryx/envelope"
)

// cmdVerify verifies the prev_hash chain of each file. Exit 0 when no file
// has a break, a malformed line or an invalid on_behalf_of; 1 when any does
// or cannot be read; 2 for usage errors.
func cmdVerify(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("verify", "FILE...", "Verify the agent-event prev_hash chain of NDJSON files, as agent-conform -chain does.\nExit 0: every chain verifies; 1: a break, a malformed line or an unreadable file; 2: usage.", stderr)
	asJSON := fs.Bool("json", false, "print one JSON report per file")
	files, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(files) == 0 {
		fs.Usage()
		return usageErrorf("verify: no files given")
	}
	bad := false
	for _, path := range files {
		rep, err := envelope.VerifyFile(path)
		if err != nil {
			fmt.Fprintf(stderr, "%s: cannot verify: %v\n", path, err)
			bad = true
			continue
		}
		if !rep.OK() {
			bad = true
		}
		if *asJSON {
			if err := printVerifyJSON(stdout, path, rep); err != nil {
				return err
			}
			continue
		}
		printVerify(stdout, path, rep)
	}
	if bad {
		return failed()
	}
	return nil
}

func printVerify(w io.Writer, path string, rep envelope.Report) {
	verdict := "OK"
	if !rep.OK() {
		verdict = "FAIL"
	}
	fmt.Fprintf(w, "%s: %s: %d events, %d chained, %d heads, %d unverifiable, %d breaks, %d malformed, %d invalid\n",
		path, verdict, rep.Events, rep.Chained, rep.Heads, rep.Unverifiable, len(rep.Breaks), len(rep.Malformed), len(rep.Invalid))
	for _, b := range rep.Breaks {
		expected := b.Expected
		if expected == "" {
			expected = "(no previous event)"
		}
		fmt.Fprintf(w, "  line %d: break: expected prev_hash %s, found %s\n", b.Line, expected, b.Found)
	}
	for _, p := range rep.Malformed {
		fmt.Fprintf(w, "  line %d: malformed: %v\n", p.Line, p.Err)
	}
	for _, p := range rep.Invalid {
		fmt.Fprintf(w, "  line %d: invalid: %v\n", p.Line, p.Err)
	}
}

func printVerifyJSON(w io.Writer, path string, rep envelope.Report) error {
	type problem struct {
		Line  int    `json:"line"`
		Error string `json:"error"`
	}
	out := struct {
		File         string           `json:"file"`
		OK           bool             `json:"ok"`
		Events       int              `json:"events"`
		Chained      int              `json:"chained"`
		Heads        int              `json:"heads"`
		Unverifiable int              `json:"unverifiable"`
		Breaks       []envelope.Break `json:"breaks"`
		Malformed    []problem        `json:"malformed"`
		Invalid      []problem        `json:"invalid"`
	}{File: path, OK: rep.OK(), Events: rep.Events, Chained: rep.Chained, Heads: rep.Heads, Unverifiable: rep.Unverifiable,
		Breaks: rep.Breaks, Malformed: []problem{}, Invalid: []problem{}}
	if out.Breaks == nil {
		out.Breaks = []envelope.Break{}
	}
	for _, p := range rep.Malformed {
		out.Malformed = append(out.Malformed, problem{p.Line, p.Err.Error()})
	}
	for _, p := range rep.Invalid {
		out.Invalid = append(out.Invalid, problem{p.Line, p.Err.Error()})
	}
	b, err := json.Marshal(out)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// benchChain measures the chained writer against the canonicalize+hash
// floor on the same ~400-byte event, in one run.
func benchChain(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench chain", "", "Benchmark the chained NDJSON writer (fsync off) against JCS canonicalization + SHA-256 alone.", stderr)
	dur := fs.Duration("time", 2*time.Second, "minimum time per benchmark")
	if _, err := parseFlags(fs, args); err != nil {
		return err
	}
	ev := envelope.New(envelope.TypeQualityScore, "agent://acme.example/support/tier1-bot", "run-20260724-0001",
		map[string]any{"case_id": "numeric-source-verdigris-dose", "value": 0.8333333333333334, "tokens": 1234, "cost_usd": 0.001234,
			"grader": "rag", "eval_set": "grimoire-golden-v1", "reasons": []any{"must_contain: 3 drams", "cited [verdigris-dose-verdant]"}},
		time.Now())
	line, err := ev.MarshalJSON()
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "verdryx-bench-chain-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	w, err := envelope.OpenWriter(filepath.Join(dir, "events.ndjson"), envelope.WriterOptions{})
	if err != nil {
		return err
	}
	defer w.Close()
	floor := benchFor(*dur, func() error { _, err := ev.Hash(); return err })
	writer := benchFor(*dur, func() error { _, err := w.Append(ev); return err })
	if floor.err != nil || writer.err != nil {
		return fmt.Errorf("bench chain: %v %v", floor.err, writer.err)
	}
	fmt.Fprintf(stdout, "event size: %d bytes\n", len(line))
	fmt.Fprintf(stdout, "canonicalize+sha256 (floor): %10.0f events/s  %6.0f ns/event  %5.1f allocs/event\n", floor.perSec(), floor.nsPer(), floor.allocsPer())
	fmt.Fprintf(stdout, "chained writer (fsync off):  %10.0f events/s  %6.0f ns/event  %5.1f allocs/event\n", writer.perSec(), writer.nsPer(), writer.allocsPer())
	fmt.Fprintf(stdout, "writer / floor time ratio:   %.2fx (target <= 2x; target rate >= 200000 events/s)\n", writer.nsPer()/floor.nsPer())
	return nil
}

type benchResult struct {
	n      int
	d      time.Duration
	allocs uint64
	err    error
}

func (r benchResult) perSec() float64    { return float64(r.n) / r.d.Seconds() }
func (r benchResult) nsPer() float64     { return float64(r.d.Nanoseconds()) / float64(r.n) }
func (r benchResult) allocsPer() float64 { return float64(r.allocs) / float64(r.n) }

// benchFor calls f repeatedly for at least d and reports the rate and the
// heap allocations per call.
func benchFor(d time.Duration, f func() error) benchResult {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	n := 0
	for time.Since(start) < d {
		for i := 0; i < 1000; i++ {
			if err := f(); err != nil {
				return benchResult{err: err}
			}
		}
		n += 1000
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&after)
	return benchResult{n: n, d: elapsed, allocs: after.Mallocs - before.Mallocs}
}
