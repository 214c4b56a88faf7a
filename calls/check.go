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

// MaxCallMicroUSD is the most one call may cost, in micro-USD: $1,000,000,
// far above any real model call. A call costing more (cost_microusd, or
// cost_usd times 1e6) is refused on every path (a segment row, a record
// of --input, a trace message), naming the field. With it, int64 sums of
// call costs hold more than 9.2 million calls at the maximum ($9.2 trillion
// of spend) before they could overflow; an overflow is still checked and
// refused where it happens, never wrapped.
const MaxCallMicroUSD int64 = 1_000_000_000_000

// MaxCallUSD is MaxCallMicroUSD in USD.
const MaxCallUSD = float64(MaxCallMicroUSD) / 1e6

// CheckCostMicroUSD refuses a cost_microusd below 0 or above
// MaxCallMicroUSD, naming the field.
func CheckCostMicroUSD(v int64) error {
	switch {
	case v < 0:
		return fmt.Errorf("field %s: %d is negative", ColCostMicroUSD, v)
	case v > MaxCallMicroUSD:
		return fmt.Errorf("field %s: %d is over the per-call maximum of %d ($1,000,000)", ColCostMicroUSD, v, MaxCallMicroUSD)
	}
	return nil
}

// CheckCostUSD refuses a cost_usd that is not a finite number from 0 to
// MaxCallUSD, naming the field.
func CheckCostUSD(v float64) error {
	switch {
	case v < 0 || math.IsNaN(v) || math.IsInf(v, 0):
		return fmt.Errorf("field cost_usd: %v is not a non-negative number", v)
	case v > MaxCallUSD:
		return fmt.Errorf("field cost_usd: %v is over the per-call maximum of $1,000,000", v)
	}
	return nil
}

// MicroUSD converts a cost_usd that passed CheckCostUSD to micro-USD,
// rounded to the nearest.
func MicroUSD(usd float64) int64 { return int64(math.Round(usd * 1e6)) }

// Check refuses values no real call has: a cost (cost_microusd or
// cost_usd) that is negative, above the per-call maximum
// (MaxCallMicroUSD) or, for cost_usd, not a finite number. The error names
// the field. Token counts and steps are unsigned: a negative one is
// already refused by the decoder, naming the field. Every other field is
// optional (docs/traces.md). agent_id in particular is not checked: a
// call's agent_id is data, not an identity verdryx acts for. TokenFuse
// writes whatever its gateway was given, cost-per-correct counts every
// such call, and the SLO report leaves a non-canonical subject out of
// slo_burn events; refusing it here would make the worker's report differ
// from the direct reduction of the same rows.
func (r *Record) Check() error {
	if r.HasField(FieldCostMicroUSD) {
		if err := CheckCostMicroUSD(r.CostMicroUSD); err != nil {
			return err
		}
	}
	if r.HasCostUSD() {
		return CheckCostUSD(r.CostUSD)
	}
	return nil
}
