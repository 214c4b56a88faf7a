// Package ingest is `verdryx bench ingest`: a generated per-call NDJSON
// file (GenerateNDJSON) read by encoding/json, by the record decoder and by
// the whole cost-per-correct --input reduction, in one run (RunNDJSON).
package ingest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	"github.com/verdryx/verdryx/bench/rss"
	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/strictjson"
	"github.com/verdryx/verdryx/outcome"
)

// GenerateNDJSON writes n per-call records to w, one per line, about 250
// bytes each (1,000,000 records make about 247 MB): runs of ten steps,
// 1,000 runs in flight at a time, the outcome on each run's last step, a
// tenth of the calls blocked or held, eleven columns on every line.
func GenerateNDJSON(w io.Writer, n int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	models := []string{"claude-sonnet-4-5", "gpt-4o-mini", "gemini-2.5-flash"}
	decisions := []string{"allow", "allow", "allow", "allow", "allow", "allow", "allow", "allow", "budget_exceeded", "wardryx_hold"}
	outcomes := []string{"case_resolved", "case_resolved", "escalated", "abandoned"}
	var b []byte
	for i := range n {
		run := (i/10_000)*1_000 + i%1_000
		step := (i / 1_000) % 10
		b = append(b[:0], `{"ts_millis":`...)
		b = strconv.AppendInt(b, 1_764_565_200_000+int64(i)*7, 10)
		b = append(b, `,"run_id":"run-`...)
		b = appendPadded(b, run)
		b = append(b, `","model":"`...)
		b = append(b, models[run%len(models)]...)
		b = append(b, `","decision":"`...)
		b = append(b, decisions[(i*7)%len(decisions)]...)
		b = append(b, `","input_tokens":`...)
		b = strconv.AppendInt(b, int64(800+(i*37)%2400), 10)
		b = append(b, `,"output_tokens":`...)
		b = strconv.AppendInt(b, int64(100+(i*13)%600), 10)
		b = append(b, `,"cost_microusd":`...)
		b = strconv.AppendInt(b, int64(2_000+(i*131)%12_000), 10)
		b = append(b, `,"step":`...)
		b = strconv.AppendInt(b, int64(step), 10)
		b = append(b, `,"agent_id":"agent://acme.example/bot-`...)
		b = strconv.AppendInt(b, int64(run%7), 10)
		b = append(b, `","key_id":"key-`...)
		b = strconv.AppendInt(b, int64(100+run%23), 10)
		b = append(b, `","tool_calls":`...)
		b = strconv.AppendInt(b, int64(i%4), 10)
		if step == 9 {
			b = append(b, `,"outcome":"`...)
			b = append(b, outcomes[run%len(outcomes)]...)
			b = append(b, '"')
		}
		b = append(b, "}\n"...)
		if _, err := bw.Write(b); err != nil {
			return fmt.Errorf("generate records: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("generate records: %w", err)
	}
	return nil
}

func appendPadded(b []byte, v int) []byte {
	s := strconv.Itoa(v)
	for range 8 - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// NDJSONOptions configures RunNDJSON. Zero Records, Rounds and Procs take
// 1,000,000, 3 and 1.
type NDJSONOptions struct {
	Records int    // records to generate when File is empty
	File    string // the NDJSON file: read if it exists, else generated there and kept

	Rounds int // measured passes of each kind; the best is reported
	Procs  int // GOMAXPROCS during the measured passes (all are single-threaded)
}

// Pass is the best of one kind of measured pass over the file.
type Pass struct {
	Seconds         float64 `json:"seconds"`
	MBPerSec        float64 `json:"mb_per_sec"` // 10^6 bytes per second
	AllocsPerRecord float64 `json:"allocs_per_record"`
	PeakRSSMiB      float64 `json:"peak_rss_mib"`
}

// NDJSONResult holds the figures of one RunNDJSON: four passes over the
// same file in the same process, and each one's speed relative to the
// encoding/json decoder's.
type NDJSONResult struct {
	File       string `json:"file"`
	Records    int64  `json:"records"`
	Bytes      int64  `json:"bytes"`
	Generated  bool   `json:"generated"`
	Rounds     int    `json:"rounds"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	// JSONBare: each line decoded by strictjson.Decode (encoding/json,
	// the decoder --input used before), nothing else.
	JSONBare Pass `json:"encoding_json_bare"`
	// DecoderBare: each line decoded by calls.ScanNDJSON (the record
	// decoder of --input, the tailer and trace messages), nothing else.
	DecoderBare Pass `json:"decoder_bare"`
	// Input: what cost-per-correct --input does: outcome.ReadRecordsFile
	// into a reducer, then the report rendered as a table.
	Input Pass `json:"input"`
	// JSONInput: the same reduction fed by strictjson.Decode and Reducer.Add,
	// as --input was before the record decoder.
	JSONInput Pass `json:"encoding_json_input"`
	// Speed-ups: DecoderBare, Input and JSONInput over JSONBare; Input
	// over DecoderBare (the share of the decoder's rate the reduction
	// keeps) and over JSONInput.
	DecoderOverJSON    float64 `json:"decoder_over_json"`
	InputOverJSON      float64 `json:"input_over_json"`
	JSONInputOverJSON  float64 `json:"json_input_over_json"`
	InputOverDecoder   float64 `json:"input_over_decoder"`
	InputOverJSONInput float64 `json:"input_over_json_input"`
	// ReportsEqual: the Input and JSONInput passes printed the same report.
	ReportsEqual bool `json:"reports_equal"`
	// Report is the table the Input pass printed.
	Report string `json:"-"`
}

// Check returns an error when the two reductions disagree.
func (r NDJSONResult) Check() error {
	if !r.ReportsEqual {
		return errors.New("bench ingest: the record decoder's report differs from encoding/json's")
	}
	return nil
}

// RunNDJSON generates opts.Records per-call records into opts.File (a
// temporary file when empty; an existing file is read as it is) and
// measures, best of opts.Rounds, the
// encoding/json decoder, the record decoder and the full --input
// reduction over it, old and new.
func RunNDJSON(ctx context.Context, opts NDJSONOptions) (NDJSONResult, error) {
	if opts.Records == 0 {
		opts.Records = 1_000_000
	}
	if opts.Rounds == 0 {
		opts.Rounds = 3
	}
	if opts.Procs == 0 {
		opts.Procs = 1
	}
	if opts.Records < 0 || opts.Rounds < 0 || opts.Procs < 0 {
		return NDJSONResult{}, errors.New("bench ingest: records, rounds and procs must be positive")
	}
	res := NDJSONResult{File: opts.File, Rounds: opts.Rounds, GOMAXPROCS: opts.Procs}
	if res.File == "" {
		dir, err := os.MkdirTemp("", "verdryx-bench-ingest-")
		if err != nil {
			return res, fmt.Errorf("bench ingest: %w", err)
		}
		defer os.RemoveAll(dir)
		res.File = filepath.Join(dir, "calls.ndjson")
	}
	if _, err := os.Stat(res.File); errors.Is(err, fs.ErrNotExist) {
		if err := generateFile(res.File, opts.Records); err != nil {
			return res, err
		}
		res.Generated = true
	}
	st, err := os.Stat(res.File)
	if err != nil {
		return res, fmt.Errorf("bench ingest: %w", err)
	}
	res.Bytes = st.Size()

	prev := runtime.GOMAXPROCS(opts.Procs)
	defer runtime.GOMAXPROCS(prev)
	var newReport, oldReport []byte
	passes := []struct {
		dst *Pass
		run func() (int64, error)
	}{
		{&res.JSONBare, func() (int64, error) { return jsonBare(res.File) }},
		{&res.DecoderBare, func() (int64, error) { return decoderBare(res.File) }},
		{&res.Input, func() (int64, error) {
			n, rep, err := reduce(res.File, outcome.ReadRecordsFile)
			newReport = rep
			return n, err
		}},
		{&res.JSONInput, func() (int64, error) {
			n, rep, err := reduce(res.File, jsonFold)
			oldReport = rep
			return n, err
		}},
	}
	for round := range opts.Rounds {
		for _, p := range passes {
			if err := ctx.Err(); err != nil {
				return res, err
			}
			runtime.GC()
			rss.ResetPeak()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			start := time.Now()
			n, err := p.run()
			d := time.Since(start)
			runtime.ReadMemStats(&after)
			if err != nil {
				return res, err
			}
			res.Records = n
			if round == 0 || d.Seconds() < p.dst.Seconds {
				*p.dst = Pass{
					Seconds:         d.Seconds(),
					MBPerSec:        float64(res.Bytes) / 1e6 / d.Seconds(),
					AllocsPerRecord: float64(after.Mallocs-before.Mallocs) / float64(max(n, 1)),
					PeakRSSMiB:      float64(rss.Peak()) / (1 << 20),
				}
			}
		}
	}
	res.DecoderOverJSON = res.DecoderBare.MBPerSec / res.JSONBare.MBPerSec
	res.InputOverJSON = res.Input.MBPerSec / res.JSONBare.MBPerSec
	res.JSONInputOverJSON = res.JSONInput.MBPerSec / res.JSONBare.MBPerSec
	res.InputOverDecoder = res.Input.MBPerSec / res.DecoderBare.MBPerSec
	res.InputOverJSONInput = res.Input.MBPerSec / res.JSONInput.MBPerSec
	res.ReportsEqual = bytes.Equal(newReport, oldReport)
	res.Report = string(newReport)
	return res, nil
}

// generateFile writes n generated records to a new file at path.
func generateFile(path string, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("bench ingest: %w", err)
	}
	err = GenerateNDJSON(f, n)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

// jsonBare decodes every line of path with strictjson.Decode.
func jsonBare(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 256*1024), 16<<20)
	var n int64
	for sc.Scan() {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec jsonRecord
		if err := strictjson.Decode(b, &rec); err != nil {
			return n, fmt.Errorf("%s:%d: %w", path, n+1, err)
		}
		n++
	}
	return n, sc.Err()
}

// decoderBare decodes every line of path with the record decoder.
func decoderBare(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var n int64
	err = calls.ScanNDJSON(f, path, func(*calls.Record) error { n++; return nil })
	return n, err
}

// jsonRecord is what encoding/json decoded a record line into before the
// record decoder (calls.RecordDecoder) replaced it: the baseline measured,
// a pointer per key to tell an absent key from a zero.
type jsonRecord struct {
	TSMillis      *int64          `json:"ts_millis"`
	RunID         *string         `json:"run_id"`
	Model         *string         `json:"model"`
	Decision      *string         `json:"decision"`
	InputTokens   *uint64         `json:"input_tokens"`
	OutputTokens  *uint64         `json:"output_tokens"`
	CostMicroUSD  *int64          `json:"cost_microusd"`
	Step          *uint32         `json:"step"`
	AgentID       *string         `json:"agent_id"`
	SavedMicroUSD *int64          `json:"saved_microusd"`
	ParentRunID   *string         `json:"parent_run_id"`
	OnBehalfOf    *string         `json:"on_behalf_of"`
	Outcome       *string         `json:"outcome"`
	KeyID         *string         `json:"key_id"`
	Unit          *string         `json:"unit"`
	ToolCalls     *uint32         `json:"tool_calls"`
	CostUSD       *float64        `json:"cost_usd"`
	Attributes    json.RawMessage `json:"attributes,omitempty"`
	CallID        string          `json:"call_id,omitempty"`
}

// deref returns *p, or T's zero value when p is nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// call is rec's call, as calls.Record.Call resolves a record with
// cost_microusd (jsonFold takes a cost_usd record apart).
func (rec *jsonRecord) call() calls.Call {
	return calls.Call{
		TSMillis: deref(rec.TSMillis), RunID: deref(rec.RunID), HasRunID: rec.RunID != nil,
		Model: deref(rec.Model), Decision: deref(rec.Decision), InputTokens: deref(rec.InputTokens),
		OutputTokens: deref(rec.OutputTokens), CostMicroUSD: deref(rec.CostMicroUSD), Step: deref(rec.Step),
		HasStep: rec.Step != nil, AgentID: deref(rec.AgentID), SavedMicroUSD: deref(rec.SavedMicroUSD),
		ParentRunID: deref(rec.ParentRunID), OnBehalfOf: deref(rec.OnBehalfOf), Outcome: deref(rec.Outcome),
		KeyID: deref(rec.KeyID), Unit: deref(rec.Unit), ToolCalls: rec.ToolCalls,
	}
}

// jsonFold is the --input fold as it was: every line decoded by
// strictjson.Decode into a jsonRecord, then Reducer.Add (or AddRecord).
func jsonFold(path string, r *outcome.Reducer) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 16<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		var rec jsonRecord
		if err := strictjson.Decode(b, &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
		switch {
		case rec.CostUSD != nil && rec.CostMicroUSD == nil:
			r.AddRecord(deref(rec.Outcome), int64(math.Round(*rec.CostUSD*1e6)))
		case rec.RunID == nil && rec.Outcome == nil && rec.CostMicroUSD == nil:
			return fmt.Errorf("%s:%d: not an outcome record", path, line)
		default:
			r.Add(rec.call())
		}
		if err := r.Err(); err != nil {
			return fmt.Errorf("%s:%d: %w", path, line, err)
		}
	}
	return sc.Err()
}

// reduce runs read over path into a fresh reducer and renders the report,
// as cost-per-correct --input does.
func reduce(path string, read func(string, *outcome.Reducer) error) (int64, []byte, error) {
	r, err := outcome.NewReducer(outcome.Options{})
	if err != nil {
		return 0, nil, err
	}
	if err := read(path, r); err != nil {
		return 0, nil, err
	}
	rep, err := r.CheckedReport()
	if err != nil {
		return 0, nil, err
	}
	var out bytes.Buffer
	if err := rep.WriteTable(&out); err != nil {
		return 0, nil, err
	}
	return r.Stats().Calls + r.Stats().Records, out.Bytes(), nil
}
