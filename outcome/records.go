package outcome

import (
	"errors"
	"io"

	"github.com/verdryx/verdryx/calls"
)

// recordFolder folds decoded records into a Reducer with no allocation per
// record: strings are interned from the record's bytes, in the order Add
// interns them, and each call goes through AddBatch as a one-row batch,
// which folds it exactly as Add does.
type recordFolder struct {
	r     *Reducer
	by    calls.Field
	group bool
	b     calls.Batch
}

func newRecordFolder(r *Reducer) *recordFolder {
	f := &recordFolder{r: r}
	f.by, f.group = calls.FieldByName(r.opts.By)
	ids := func() []int32 { return make([]int32, 1) }
	f.b = calls.Batch{Len: 1, TSMillis: make([]int64, 1), RunID: ids(), Model: ids(), Decision: ids(),
		CostMicroUSD: make([]int64, 1), Step: make([]uint32, 1), AgentID: ids(), Outcome: ids(), KeyID: ids()}
	return f
}

// fold adds rec to the reducer, as a flat record or as a call, and stops at
// the reducer's first error.
func (f *recordFolder) fold(rec *calls.Record) error {
	r := f.r
	syms := r.Symbols()
	if rec.HasCostUSD() && !rec.HasField(calls.FieldCostMicroUSD) {
		// Checked by the decoder (calls.Record.Check): at most the
		// per-call maximum.
		out := syms.Intern(rec.Strings[calls.FieldOutcome])
		r.AddRecord(syms.Name(out), calls.MicroUSD(rec.CostUSD))
		return r.Err()
	}
	if !rec.HasField(calls.FieldRunID) && !rec.HasField(calls.FieldOutcome) && !rec.HasField(calls.FieldCostMicroUSD) {
		return errors.New("not an outcome record: needs run_id, outcome, cost_microusd or cost_usd")
	}
	b := &f.b
	b.HasRunID = rec.HasField(calls.FieldRunID)
	if b.HasRunID {
		b.RunID[0] = r.RunSymbols().Intern(rec.Strings[calls.FieldRunID])
	}
	if f.group {
		b.Strings(f.by)[0] = syms.Intern(rec.Strings[f.by])
	}
	b.Decision[0] = syms.Intern(rec.Strings[calls.FieldDecision])
	b.Outcome[0] = syms.Intern(rec.Strings[calls.FieldOutcome])
	b.AgentID[0] = syms.Intern(rec.Strings[calls.FieldAgentID])
	b.TSMillis[0] = rec.TSMillis
	b.CostMicroUSD[0] = rec.CostMicroUSD
	b.Step[0] = rec.Step // 0 when absent, as Add takes it
	r.AddBatch(b)
	return r.Err()
}

// ReadRecordsFile folds the outcome records of path into r (see
// calls.ScanRecordsFile for the formats). The first bad record stops the
// read with an error naming the file, line and field. NDJSON is folded
// with no allocation per record (calls.ScanNDJSON).
func ReadRecordsFile(path string, r *Reducer) error {
	return calls.ScanRecordsFile(path, newRecordFolder(r).fold)
}

// ReadRecords folds the outcome records of src (named name in errors) into
// r, in the format its first byte says (calls.ScanRecords: a JSON array,
// NDJSON or CSV).
func ReadRecords(src io.Reader, name string, r *Reducer) error {
	return calls.ScanRecords(src, name, newRecordFolder(r).fold)
}
