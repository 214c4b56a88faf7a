package outcome

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/verdryx/verdryx/calls"
)

// fold adds rec to r, as a flat record or as a call.
func fold(rec *calls.CallRecord, r *Reducer) error {
	if rec.CostUSD != nil && rec.CostMicroUSD == nil {
		v := *rec.CostUSD
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > 9e12 {
			return fmt.Errorf("cost_usd: %v is not a usable amount", v)
		}
		r.AddRecord(calls.Deref(rec.Outcome), int64(math.Round(v*1e6)))
		return nil
	}
	if rec.RunID == nil && rec.Outcome == nil && rec.CostMicroUSD == nil {
		return errors.New("not an outcome record: needs run_id, outcome, cost_microusd or cost_usd")
	}
	r.Add(rec.Call())
	return nil
}

// folder returns the record callback that folds into r and stops at the
// reducer's first error.
func folder(r *Reducer) func(*calls.CallRecord) error {
	return func(rec *calls.CallRecord) error {
		if err := fold(rec, r); err != nil {
			return err
		}
		return r.Err()
	}
}

// ReadRecordsFile folds the outcome records of path into r (see
// calls.ReadRecordsFile for the formats). The first bad record stops the
// read with an error naming the file, line and field.
func ReadRecordsFile(path string, r *Reducer) error {
	return calls.ReadRecordsFile(path, folder(r))
}

// ReadNDJSON folds NDJSON outcome records from src (named name in errors).
func ReadNDJSON(src io.Reader, name string, r *Reducer) error {
	return calls.ReadNDJSON(src, name, folder(r))
}

// ReadCSV folds CSV outcome records from src (named name in errors).
func ReadCSV(src io.Reader, name string, r *Reducer) error {
	return calls.ReadCSV(src, name, folder(r))
}
