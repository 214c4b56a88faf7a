package calls

import (
	"fmt"
	"math"
)

// ColCallID is the optional key of a per-call NDJSON record that names the
// call (the worker's dedupe key; see docs/traces.md). Its value is a string.
const ColCallID = "call_id"

// MaxRecordBytes is the default size limit of one per-call record (an
// NDJSON line, a trace message): a real call with generous attributes is a
// few kilobytes; a record past the limit is refused, not counted.
const MaxRecordBytes = 256 << 10

// CheckSize refuses a record of n bytes when n exceeds limit (0 means
// MaxRecordBytes; a negative limit disables the check).
func CheckSize(n, limit int) error {
	if limit == 0 {
		limit = MaxRecordBytes
	}
	if limit > 0 && n > limit {
		return fmt.Errorf("record of %d bytes: over the %d-byte limit per record", n, limit)
	}
	return nil
}

// Check refuses values no real call has: a negative cost (cost_microusd or
// cost_usd) or a cost_usd that is not a finite number. The
// error names the field. Token counts and steps are unsigned: a negative
// one is already refused by the decoder, naming the field.
func (r *Record) Check() error {
	switch {
	case r.HasField(FieldCostMicroUSD) && r.CostMicroUSD < 0:
		return fmt.Errorf("field %s: %d is negative", ColCostMicroUSD, r.CostMicroUSD)
	case r.HasCostUSD() && (r.CostUSD < 0 || math.IsNaN(r.CostUSD) || math.IsInf(r.CostUSD, 0)):
		return fmt.Errorf("field cost_usd: %v is not a non-negative number", r.CostUSD)
	}
	return nil
}
