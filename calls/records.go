package calls

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/verdryx/verdryx/internal/strictjson"
)

// CallRecord is one NDJSON/CSV/JSON-message outcome record: either a
// per-call record with the Parquet column names, or a flat {outcome,
// cost_usd} record. Pointers tell an absent key from a zero.
type CallRecord struct {
	TSMillis      *int64   `json:"ts_millis"`
	RunID         *string  `json:"run_id"`
	Model         *string  `json:"model"`
	Decision      *string  `json:"decision"`
	InputTokens   *uint64  `json:"input_tokens"`
	OutputTokens  *uint64  `json:"output_tokens"`
	CostMicroUSD  *int64   `json:"cost_microusd"`
	Step          *uint32  `json:"step"`
	AgentID       *string  `json:"agent_id"`
	SavedMicroUSD *int64   `json:"saved_microusd"`
	ParentRunID   *string  `json:"parent_run_id"`
	OnBehalfOf    *string  `json:"on_behalf_of"`
	Outcome       *string  `json:"outcome"`
	KeyID         *string  `json:"key_id"`
	Unit          *string  `json:"unit"`
	ToolCalls     *uint32  `json:"tool_calls"`
	CostUSD       *float64 `json:"cost_usd"`
	// Attributes carries free-form data with a record; verdryx ignores it.
	// Any other unknown key is an error naming it.
	Attributes json.RawMessage `json:"attributes,omitempty"`
	// CallID, when set, identifies the call for deduplication on the
	// traces subjects (tracemsg.RecordKey); other readers accept and
	// ignore it.
	CallID string `json:"call_id,omitempty"`
}

// Deref returns *p, or T's zero value when p is nil.
func Deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Call converts a per-call record: absent strings and numbers are ""/0, a
// missing run_id makes it an independent call, a missing step falls back to
// encounter order, and a cost_usd without cost_microusd is the call's cost
// (MicroUSD). The record should have passed Check.
func (rec *CallRecord) Call() Call {
	cost := Deref(rec.CostMicroUSD)
	if rec.CostMicroUSD == nil && rec.CostUSD != nil {
		cost = MicroUSD(*rec.CostUSD)
	}
	return Call{
		TSMillis:      Deref(rec.TSMillis),
		RunID:         Deref(rec.RunID),
		HasRunID:      rec.RunID != nil,
		Model:         Deref(rec.Model),
		Decision:      Deref(rec.Decision),
		InputTokens:   Deref(rec.InputTokens),
		OutputTokens:  Deref(rec.OutputTokens),
		CostMicroUSD:  cost,
		Step:          Deref(rec.Step),
		HasStep:       rec.Step != nil,
		AgentID:       Deref(rec.AgentID),
		SavedMicroUSD: Deref(rec.SavedMicroUSD),
		ParentRunID:   Deref(rec.ParentRunID),
		OnBehalfOf:    Deref(rec.OnBehalfOf),
		Outcome:       Deref(rec.Outcome),
		KeyID:         Deref(rec.KeyID),
		Unit:          Deref(rec.Unit),
		ToolCalls:     rec.ToolCalls,
	}
}

// ScanRecordsFile calls fn with each outcome record of path: NDJSON (one
// object per line, blank lines skipped), a JSON array of records, or CSV
// (header row naming the columns). Each record is a per-call record with
// the Parquet column names (a record without a run_id key is an
// independent call) or a flat {outcome, cost_usd} record. The first bad
// record, or the first error of fn, stops the read with an error naming the
// file and line (and the field, for a bad record). Each record is decoded
// in place (see ScanNDJSON): the Record is valid only during fn. NDJSON is
// read with no allocation per record; a CSV row is converted. The format is the
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

func scanCSV(src io.Reader, name string, fn func(*Record) error) error {
	var rec Record
	return ReadCSV(src, name, func(cr *CallRecord) error {
		rec.SetFrom(cr)
		if err := rec.Check(); err != nil {
			return err
		}
		return fn(&rec)
	})
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
		rd  = RecordDecoder{ext: []string{ColCallID}}
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
		var ref CallRecord
		if err := strictjson.Decode(b, &ref); err != nil {
			return err
		}
		rec.SetFrom(&ref) // never expected: the fast path is tested to agree
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
// accepted (a string) and not passed on.
func ScanNDJSON(src io.Reader, name string, fn func(*Record) error) error {
	sc := bufio.NewScanner(src)
	sc.Buffer(make([]byte, 0, 256*1024), maxLineBytes)
	var (
		dec  = RecordDecoder{ext: []string{ColCallID}}
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

// Ext is a string key a record message carries beyond CallRecord's (the
// worker's trace messages add call_id and segment), decoded into *Dst. A
// null value leaves *Dst as it is, as encoding/json does for a string.
type Ext struct {
	Key string
	Dst *string
}

// DecodeRecordInto decodes one record message (a NATS trace message, a
// tailed line) into rec and the ext destinations with a RecordDecoder, the
// decoder ScanNDJSON uses. ref is what strictjson.Decode decodes data into when
// the fast path refuses it, so that errors are strictjson.Decode's word for
// word: it must be rec itself, or the struct that embeds rec and holds the
// ext destinations as its other JSON fields. rec and the destinations
// should be zero on entry. At most MaxExt ext keys. A record that decodes
// but fails Record.Check is refused with Check's error.
func DecodeRecordInto(data []byte, ref any, rec *CallRecord, ext ...Ext) error {
	if len(ext) > MaxExt {
		return fmt.Errorf("decode record: %d extra keys, at most %d", len(ext), MaxExt)
	}
	var names [MaxExt]string
	for i, e := range ext {
		names[i] = e.Key
	}
	d := RecordDecoder{ext: names[:len(ext)]}
	var r Record
	if !d.Decode(data, &r) {
		if err := strictjson.Decode(data, ref); err != nil {
			return err
		}
		r.SetFrom(rec)
		return r.Check()
	}
	if err := r.Check(); err != nil {
		return err
	}
	r.fill(rec)
	for i, e := range ext {
		if r.HasExt(i) {
			*e.Dst = string(r.Ext[i])
		}
	}
	return nil
}

// ReadCSV calls fn with each CSV outcome record of src (named name in
// errors). The
// header names the columns; unknown columns are ignored and an empty cell
// reads as absent.
func ReadCSV(src io.Reader, name string, fn func(*CallRecord) error) error {
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
	for {
		row, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		line, _ := cr.FieldPos(0)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		var rec CallRecord
		for i, cell := range row {
			if i >= len(cols) {
				break
			}
			if err := rec.set(cols[i], cell); err != nil {
				return fmt.Errorf("%s:%d: field %s: %w", name, line, cols[i], err)
			}
		}
		if hasRunID && rec.RunID == nil {
			empty := ""
			rec.RunID = &empty
		}
		if err := fn(&rec); err != nil {
			return fmt.Errorf("%s:%d: %w", name, line, err)
		}
	}
}

func (rec *CallRecord) set(col, cell string) error {
	str := func(dst **string) error {
		if cell != "" {
			*dst = &cell
		}
		return nil
	}
	if cell == "" {
		return nil
	}
	switch col {
	case ColRunID:
		return str(&rec.RunID)
	case ColModel:
		return str(&rec.Model)
	case ColDecision:
		return str(&rec.Decision)
	case ColAgentID:
		return str(&rec.AgentID)
	case ColParentRunID:
		return str(&rec.ParentRunID)
	case ColOnBehalfOf:
		return str(&rec.OnBehalfOf)
	case ColOutcome:
		return str(&rec.Outcome)
	case ColKeyID:
		return str(&rec.KeyID)
	case ColUnit:
		return str(&rec.Unit)
	case ColTSMillis:
		return parseInt(cell, 64, &rec.TSMillis)
	case ColCostMicroUSD:
		return parseInt(cell, 64, &rec.CostMicroUSD)
	case ColSavedMicro:
		return parseInt(cell, 64, &rec.SavedMicroUSD)
	case ColInputTokens:
		return parseUint(cell, 64, &rec.InputTokens)
	case ColOutputTokens:
		return parseUint(cell, 64, &rec.OutputTokens)
	case ColStep:
		return parseUint(cell, 32, &rec.Step)
	case ColToolCalls:
		return parseUint(cell, 32, &rec.ToolCalls)
	case "cost_usd":
		v, err := strconv.ParseFloat(cell, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", cell)
		}
		rec.CostUSD = &v
	}
	return nil
}

func parseInt(cell string, bits int, dst **int64) error {
	v, err := strconv.ParseInt(cell, 10, bits)
	if err != nil {
		return fmt.Errorf("%q: want a whole number from %d to %d", cell, -(int64(1) << (bits - 1)), int64(1)<<(bits-1)-1)
	}
	*dst = &v
	return nil
}

func parseUint[T uint32 | uint64](cell string, bits int, dst **T) error {
	v, err := strconv.ParseUint(cell, 10, bits)
	if err != nil {
		return fmt.Errorf("%q: want a whole number from 0 to %d", cell, uint64(1)<<(bits-1)*2-1)
	}
	t := T(v)
	*dst = &t
	return nil
}
