package calls

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/verdryx/verdryx/internal/strictjson"
)

// refRecord is the reference form of Record's decoding: what
// strictjson.Decode (encoding/json, unknown keys refused) decodes a record
// into. RecordDecoder is tested to accept exactly what it accepts, with
// the same values; a record the fast path refuses is decoded into it only
// to word the error as strictjson.Decode does. Pointers tell an absent key
// from a zero; call_id is a plain string (a null leaves it as it was).
type refRecord struct {
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

// Call returns the call r records, its resolved value: an absent string
// or number is ""/0 (as Record holds it), a missing run_id makes it an independent call
// (HasRunID false), a missing step falls back to encounter order (HasStep
// false), a missing tool_calls is nil, and a cost_usd without
// cost_microusd is the call's cost (MicroUSD). Strings are copied. r should
// have passed Check.
func (r *Record) Call() Call {
	cost := r.CostMicroUSD
	if !r.HasField(FieldCostMicroUSD) && r.HasCostUSD() {
		cost = MicroUSD(r.CostUSD)
	}
	c := Call{
		TSMillis:      r.TSMillis,
		RunID:         string(r.Strings[FieldRunID]),
		HasRunID:      r.HasField(FieldRunID),
		Model:         string(r.Strings[FieldModel]),
		Decision:      string(r.Strings[FieldDecision]),
		InputTokens:   r.InputTokens,
		OutputTokens:  r.OutputTokens,
		CostMicroUSD:  cost,
		Step:          r.Step,
		HasStep:       r.HasField(FieldStep),
		AgentID:       string(r.Strings[FieldAgentID]),
		SavedMicroUSD: r.SavedMicroUSD,
		ParentRunID:   string(r.Strings[FieldParentRunID]),
		OnBehalfOf:    string(r.Strings[FieldOnBehalfOf]),
		Outcome:       string(r.Strings[FieldOutcome]),
		KeyID:         string(r.Strings[FieldKeyID]),
		Unit:          string(r.Strings[FieldUnit]),
	}
	if r.HasField(FieldToolCalls) {
		n := r.ToolCalls
		c.ToolCalls = &n
	}
	return c
}

// DecodeRecord decodes one record message (a trace message, a tailed
// line) into rec strictly, as ScanNDJSON decodes a line: unknown keys and
// trailing data are errors, free-form data goes in "attributes", call_id
// is accepted, and a refused record's error is strictjson.Decode's word for
// word (naming the field and byte offset); a record that decodes but fails
// Record.Check is refused with Check's error. rec's strings are slices of
// data or of a buffer of this call alone: they stay valid as long as data
// does (and is not modified).
func DecodeRecord(data []byte, rec *Record) error {
	var d RecordDecoder
	return d.decodeChecked(data, rec)
}

// ScanRecordsFile calls fn with each outcome record of path: NDJSON (one
// object per line, blank lines skipped), a JSON array of records, or CSV
// (header row naming the columns). Each record is a per-call record with
// the Parquet column names (a record without a run_id key is an
// independent call) or a flat {outcome, cost_usd} record. The first bad
// record, or the first error of fn, stops the read with an error naming the
// file and line (and the field, for a bad record). Each record is decoded
// in place (see ScanNDJSON): the Record is valid only during fn. NDJSON is
// read with no allocation per record; a CSV row's strings are copied. The format is the
// extension's (.ndjson, .jsonl: NDJSON; .csv: CSV; .json: a JSON array
// when the file starts with '[', else NDJSON); any other name is read as
// its first byte says (see ScanRecords).
func ScanRecordsFile(path string, fn func(*Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open records: %w", err)
	}
	defer f.Close()
	switch strings.ToLower(filepath.Ext(path)) {
	case ".ndjson", ".jsonl":
		return ScanNDJSON(f, path, fn)
	case ".csv":
		return scanCSV(f, path, fn)
	}
	return ScanRecords(f, path, fn)
}

// ScanRecords reads the records of src (named name in errors) in the
// format its first byte that is not white space says: '[' a JSON array of
// records (what tokenfuse outcomes --json prints), '{' NDJSON, anything
// else CSV with a header row. Empty input holds no records.
func ScanRecords(src io.Reader, name string, fn func(*Record) error) error {
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		c, err := br.ReadByte()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if c == ' ' || c == '\t' || c == '\r' || c == '\n' {
			continue
		}
		if err := br.UnreadByte(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		switch c {
		case '[':
			return ScanJSONArray(br, name, fn)
		case '{':
			return ScanNDJSON(br, name, fn)
		}
		return scanCSV(br, name, fn)
	}
}

// ScanJSONArray calls fn with each record of a JSON array of records read
// from src (named name in errors), each decoded and checked as an NDJSON
// line is (ScanNDJSON). An error names the record by its place in the
// array, from 1, and its byte offset: "export.json: record 3 (byte 120):
// field cost_usd: ...". Memory is one record at a time.
func ScanJSONArray(src io.Reader, name string, fn func(*Record) error) error {
	dec := json.NewDecoder(src)
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("%s: %w", name, strictjson.Describe(err))
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return fmt.Errorf("%s: want a JSON array of records", name)
	}
	var (
		rd  RecordDecoder
		rec Record
		raw json.RawMessage
	)
	for n := 1; dec.More(); n++ {
		off := dec.InputOffset()
		raw = raw[:0]
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%s: record %d (byte %d): %w", name, n, off, strictjson.Describe(err))
		}
		if err := CheckSize(len(raw), 0); err != nil {
			return fmt.Errorf("%s: record %d (byte %d): %w", name, n, off, err)
		}
		if err := rd.decodeChecked(raw, &rec); err != nil {
			return fmt.Errorf("%s: record %d (byte %d): %w", name, n, off, err)
		}
		if err := fn(&rec); err != nil {
			return fmt.Errorf("%s: record %d (byte %d): %w", name, n, off, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("%s: end of the array: %w", name, strictjson.Describe(err))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("%s: trailing data after the JSON array at byte %d", name, dec.InputOffset())
	}
	return nil
}

// decodeChecked decodes one record (an NDJSON line, an element of a JSON
// array) into rec and checks it (Record.Check), with strictjson.Decode's
// errors when the fast path refuses it.
func (d *RecordDecoder) decodeChecked(b []byte, rec *Record) error {
	if !d.Decode(b, rec) {
		var ref refRecord
		if err := strictjson.Decode(b, &ref); err != nil {
			return err
		}
		rec.setFrom(&ref) // never expected: the fast path is tested to agree
	}
	return rec.Check()
}

// ScanNDJSON calls fn with each NDJSON outcome record of src (named name in
// errors), decoded in place by a RecordDecoder: the Record and its bytes
// are valid only during fn. Lines are trimmed of white space (Unicode's,
// as bytes.TrimSpace does) and blank ones skipped. The first bad record
// stops the read with strictjson.Decode's error prefixed by name and line
// ("calls.ndjson:12: unknown field \"x\""), as does a line over
// MaxRecordBytes or one that fails Record.Check (a negative cost); an
// error of fn is prefixed the same way. call_id, the call's identity, is
// accepted (a string) and in the Record; the folds ignore it.
func ScanNDJSON(src io.Reader, name string, fn func(*Record) error) error {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 256*1024), maxLineBytes)
	var (
		dec  RecordDecoder
		rec  Record
		line int
	)
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if err := CheckSize(len(b), 0); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := dec.decodeChecked(b, &rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := fn(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%s:%d: a line longer than %d bytes, the longest read (a record is at most %d bytes)", name, line+1, maxLineBytes, MaxRecordBytes)
	} else if err != nil {
		return fmt.Errorf("%s: after line %d: %w", name, line, err)
	}
	return nil
}

// maxLineBytes is the longest NDJSON line ScanNDJSON reads: longer than
// any record may be, so that a record over MaxRecordBytes is refused by
// its size, named; a longer line stops the read, named by its number.
const maxLineBytes = 16 << 20

// scanCSV calls fn with each CSV outcome record of src (named name in
// errors), checked (Record.Check). The header names the columns; unknown
// columns are ignored and an empty cell reads as absent, but for run_id:
// with a run_id column, every row is part of a run (an empty cell is the
// run ""). A later column of the same name wins. The Record is valid only
// during fn.
func scanCSV(src io.Reader, name string, fn func(*Record) error) error {
	cr := csv.NewReader(src)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: empty CSV, want a header row", name)
		}
		return fmt.Errorf("%s: header: %w", name, err)
	}
	cols := make([]string, len(header))
	for i, h := range header {
		cols[i] = strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))
	}
	hasRunID := false
	for _, c := range cols {
		hasRunID = hasRunID || c == ColRunID
	}
	var rec Record
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		rec = Record{}
		for i, cell := range row {
			if i >= len(cols) {
				break
			}
			if err := rec.setCell(cols[i], cell); err != nil {
				return fmt.Errorf("%s:%d: field %s: %w", name, line, cols[i], err)
			}
		}
		if hasRunID {
			rec.Has |= 1 << FieldRunID
		}
		if err := rec.Check(); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
		if err := fn(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

// setCell sets column col of r to the CSV cell (not "", which is absent);
// an unknown column is ignored.
func (r *Record) setCell(col, cell string) error {
	if cell == "" {
		return nil
	}
	if col == "cost_usd" {
		v, err := strconv.ParseFloat(cell, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", cell)
		}
		r.CostUSD = v
		r.Has |= 1 << bitCostUSD
		return nil
	}
	f, ok := FieldByName(col)
	if !ok {
		return nil
	}
	var err error
	switch f {
	case FieldTSMillis:
		r.TSMillis, err = parseInt(cell)
	case FieldCostMicroUSD:
		r.CostMicroUSD, err = parseInt(cell)
	case FieldSavedMicroUSD:
		r.SavedMicroUSD, err = parseInt(cell)
	case FieldInputTokens:
		r.InputTokens, err = parseUint(cell, 64)
	case FieldOutputTokens:
		r.OutputTokens, err = parseUint(cell, 64)
	case FieldStep, FieldToolCalls:
		var v uint64
		v, err = parseUint(cell, 32)
		if f == FieldStep {
			r.Step = uint32(v)
		} else {
			r.ToolCalls = uint32(v)
		}
	default: // a string column
		r.Strings[f] = []byte(cell)
	}
	if err != nil {
		return err
	}
	r.Has |= 1 << f
	return nil
}

func parseInt(cell string) (int64, error) {
	v, err := strconv.ParseInt(cell, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q: want a whole number from %d to %d", cell, int64(math.MinInt64), int64(math.MaxInt64))
	}
	return v, nil
}

func parseUint(cell string, bits int) (uint64, error) {
	v, err := strconv.ParseUint(cell, 10, bits)
	if err != nil {
		return 0, fmt.Errorf("%q: want a whole number from 0 to %d", cell, uint64(1)<<(bits-1)*2-1)
	}
	return v, nil
}
