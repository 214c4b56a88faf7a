package outcome

import (
	"errors"
	"fmt"
	"math"

	"github.com/verdryx/verdryx/internal/wire"
)

// ErrOverflow marks a cost sum that would overflow int64 micro-USD: the
// reducer refuses to report a wrapped total.
var ErrOverflow = errors.New("cost sum overflows int64 micro-USD")

// addCost adds v to *dst with checked arithmetic. On overflow *dst
// saturates and the first overflow is kept as the reducer's error, naming
// the run (run < 0 for an independent call).
func (r *Reducer) addCost(dst *int64, v int64, run int32) {
	s, ok := wire.AddInt64(*dst, v)
	if ok {
		*dst = s
		return
	}
	if v > 0 {
		*dst = math.MaxInt64
	} else {
		*dst = math.MinInt64
	}
	if r.err == nil {
		where := "an independent call"
		if run >= 0 {
			where = fmt.Sprintf("run %q", r.runSyms.Name(run))
		}
		r.err = fmt.Errorf("%s: cost_microusd %d: %w", where, v, ErrOverflow)
	}
}

// Err returns the first overflow met while adding calls, or nil. A
// caller reading records checks it after each one, so the error names the
// record that overflowed.
func (r *Reducer) Err() error { return r.err }

// CheckedReport is Report, failing when any per-run or total cost sum
// overflowed instead of returning a saturated total.
func (r *Reducer) CheckedReport() (*Report, error) {
	if r.err != nil {
		return nil, r.err
	}
	rep := r.Report()
	if rep.overflow != nil {
		return nil, rep.overflow
	}
	return rep, nil
}

// sumCost adds v to *dst, keeping the first overflow in *errp.
func sumCost(errp *error, dst *int64, v int64) {
	s, ok := wire.AddInt64(*dst, v)
	if ok {
		*dst = s
		return
	}
	if *errp == nil {
		*errp = fmt.Errorf("report total: adding %d micro-USD: %w", v, ErrOverflow)
	}
}
