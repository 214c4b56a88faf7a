package outcome

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/verdryx/verdryx/internal/hugepage"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/prefetch"
)

// Options configures a Reducer.
type Options struct {
	// By groups the report by a call field: "" for no grouping, "agent_id",
	// "key_id" or "model". A run's outcome is decided over the whole run; its
	// calls, blocked calls and cost are split by the field's value on each
	// call, so a run that used two models counts once under each.
	By string
	// From and To bound the calls taken, by ts_millis: From inclusive, To
	// exclusive. A zero time leaves that side open. Calls outside the window
	// are counted in Stats.OutsideWindow and otherwise ignored.
	From, To time.Time
	// CostOnly makes a reducer for Report alone (cost per outcome): it
	// reads neither ts_millis (unless From or To is set) nor agent_id
	// (unless By is agent_id), and keeps neither a run's last time nor
	// its agent, so a directory's reduction reads fewer columns, as a
	// query planner would push the projection down. SLO refuses such a
	// reducer, and it merges only with another CostOnly one.
	CostOnly bool
}

// errCostOnly is returned by what a CostOnly reducer cannot answer.
var errCostOnly = errors.New("the reducer was made CostOnly: it keeps no run's agent or last time")

// Stats counts what a Reducer was fed.
type Stats struct {
	// Calls is every call offered, inside the window or not.
	Calls int64 `json:"calls"`
	// OutsideWindow is the number of calls dropped by From/To.
	OutsideWindow int64 `json:"outside_window"`
	// DroppedUntagged counts untagged independent calls (from records with no
	// run_id): they have no run to fold into and are dropped.
	DroppedUntagged int64 `json:"dropped_untagged"`
	// Records is the number of flat {outcome, cost_usd} records taken.
	Records int64 `json:"records"`
}

// runState is the whole per-run memory of the reduction: a few words per
// run, however many calls the run has.
type runState = Run[uint32, int32, seq]

// runState is 64 bytes (1<<stateShift), one cache line: an interleaved
// reduction touches the states of rows at random, so its size is its cost
// (the constant below does not compile otherwise).
const stateShift = 6

const _ = -uint(unsafe.Sizeof(runState{}) ^ 1<<stateShift)

// PosRowBits is the number of low bits of a position (Pos) that hold the
// row index within its source.
const PosRowBits = 40

// Pos returns the position of row of source for SetPos: source in the high
// 24 bits, row in the low PosRowBits. For a Parquet directory, source is the
// segment's index in segment.List order and row the row index within the
// segment, so positions order rows as a sequential replay reads them.
// Rows at or past 1<<PosRowBits and sources past 1<<24 do not fit: callers
// with other inputs (NDJSON line numbers, JetStream stream sequences) pass
// their own monotone sequence to SetPos instead.
func Pos(source uint32, row uint64) uint64 {
	return uint64(source)<<PosRowBits | row&(1<<PosRowBits-1)
}

type groupAcc struct {
	calls, blocked int64
	cost           int64
}

// Reducer folds calls into per-run state, in any order, and reports cost per
// outcome and SLOs. Memory grows with the number of runs (and, with By set,
// run x group pairs), never with the number of calls; independent calls from
// files without run_id are the exception, each kept as a run of one call.
// A Reducer is not safe for concurrent use.
type Reducer struct {
	huge     bool // ask for huge pages for the run states (UseHugePages)
	by       calls.Field
	grouped  bool
	from, to int64
	windowed bool
	opts     Options

	runSyms *calls.Symbols
	syms    *calls.Symbols
	class   []calls.Class // decision class by symbol id
	runs    []runState
	anon    []runState           // independent calls (no run_id), one run each
	anonGrp []int32              // group symbol of each anon entry (By set)
	flat    []runState           // flat {outcome, cost_usd} records
	groups  map[uint64]*groupAcc // run index<<32 | group symbol, when grouped
	stats   Stats
	pos     uint64 // position of the next row offered (SetPos)
	err     error  // first sum overflow (checked.go)
}

// UseHugePages makes the reducer ask for transparent huge pages for its
// run states and symbol tables when they grow from now on: for a process
// that reduces a directory and exits (see package segment's
// Scanner.UseHugePages). Not for a long-running process.
func (r *Reducer) UseHugePages() {
	r.huge = true
	r.runSyms.UseHugePages()
	r.syms.UseHugePages()
}

// SetPos sets the position of the next call offered; each call offered
// (Add, each row of AddBatch, AddRecord; inside the window or not) takes the
// current position and advances it by one. Positions are the tie-break of
// "last outcome by step": of two non-empty outcomes (or agent ids) of a run
// at the same step, the one at the greater position is kept, whichever was
// added first and in whichever reducer (see Merge). A reducer starts at
// position 0, so feeding one reducer in read order without calling SetPos
// keeps the later call. To make reductions split over several reducers
// equal the sequential one, give every call its position in the sequential
// order: Pos(segment, row) for segment rows, a line number or a stream
// sequence for records.
func (r *Reducer) SetPos(pos uint64) { r.pos = pos }

// NewReducer returns an empty reducer.
func NewReducer(opts Options) (*Reducer, error) {
	r := &Reducer{opts: opts, runSyms: calls.NewSymbols(), syms: calls.NewSymbols()}
	switch opts.By {
	case "":
	case calls.ColAgentID, calls.ColKeyID, calls.ColModel:
		r.by, _ = calls.FieldByName(opts.By)
		r.grouped = true
		r.groups = make(map[uint64]*groupAcc)
	default:
		return nil, fmt.Errorf("group by %q: want agent_id, key_id or model", opts.By)
	}
	if !opts.From.IsZero() || !opts.To.IsZero() {
		r.windowed = true
		r.from, r.to = -1<<63, 1<<63-1
		if !opts.From.IsZero() {
			r.from = opts.From.UnixMilli()
		}
		if !opts.To.IsZero() {
			r.to = opts.To.UnixMilli()
		}
		if r.to <= r.from {
			return nil, fmt.Errorf("time window: its end %s is not after its start %s",
				opts.To.UTC().Format(time.RFC3339), opts.From.UTC().Format(time.RFC3339))
		}
	}
	return r, nil
}

// Fields returns the columns the reduction reads: the rest of a Batch may be
// nil (for a CostOnly reducer, ts_millis without a window and agent_id
// unless grouped by it).
func (r *Reducer) Fields() calls.FieldSet {
	s := calls.Fields(calls.FieldRunID, calls.FieldDecision, calls.FieldCostMicroUSD, calls.FieldStep, calls.FieldOutcome)
	if !r.opts.CostOnly || r.windowed {
		s |= calls.Fields(calls.FieldTSMillis)
	}
	if !r.opts.CostOnly {
		s |= calls.Fields(calls.FieldAgentID)
	}
	if r.grouped {
		s |= calls.Fields(r.by)
	}
	return s
}

// CheckFields returns the columns a reducer made without CostOnly reads and
// this one does not: a reader of segments verifies them without handing
// them out (segment.NewCheckingScanner), so that a CostOnly reduction
// skips exactly the segments a full one, or the worker, skips.
func (r *Reducer) CheckFields() calls.FieldSet {
	return calls.Fields(calls.FieldTSMillis, calls.FieldAgentID) &^ r.Fields()
}

// Options returns the options r was made with: a reducer made with them
// can be merged into r.
func (r *Reducer) Options() Options { return r.opts }

// RunSymbols is the table a Batch's RunID ids must come from.
func (r *Reducer) RunSymbols() *calls.Symbols { return r.runSyms }

// Symbols is the table a Batch's other string ids must come from.
func (r *Reducer) Symbols() *calls.Symbols { return r.syms }

// Stats returns the counters so far.
func (r *Reducer) Stats() Stats { return r.stats }

func (r *Reducer) sync() {
	for len(r.class) < r.syms.Len() {
		r.class = append(r.class, calls.Classify(r.syms.Name(int32(len(r.class)))))
	}
	if n := r.runSyms.Len(); len(r.runs) < n {
		if cap(r.runs) >= n {
			r.runs = r.runs[:n]
		} else {
			grown := make([]runState, n, n+n/2+64)
			if r.huge {
				hugepage.Advise(grown)
			}
			copy(grown, r.runs)
			r.runs = grown
		}
	}
}

// Add folds one call at the current position (SetPos) and advances it.
// Calls may come in any order: the outcome kept for a run is the non-empty
// one at the highest step, ties going to the greater position (without
// SetPos, the later Add).
func (r *Reducer) Add(c calls.Call) {
	var run int32 = -1
	if c.HasRunID {
		run = r.runSyms.InternString(c.RunID)
	}
	var group int32
	if r.grouped {
		switch r.by {
		case calls.FieldAgentID:
			group = r.syms.InternString(c.AgentID)
		case calls.FieldKeyID:
			group = r.syms.InternString(c.KeyID)
		case calls.FieldModel:
			group = r.syms.InternString(c.Model)
		}
	}
	dec := r.syms.InternString(c.Decision)
	out := r.syms.InternString(c.Outcome)
	agent := r.syms.InternString(c.AgentID)
	r.sync()
	step := c.Step
	if !c.HasStep {
		step = 0
	}
	r.addRow(run, c.TSMillis, dec, c.CostMicroUSD, step, agent, out, group, r.pos)
	r.pos++
}

// AddRecord folds a flat {outcome, cost_usd} record, already reduced to a
// run: it counts as one run of one call. An empty outcome reads as untagged.
func (r *Reducer) AddRecord(outcome string, costMicroUSD int64) {
	r.stats.Records++
	r.pos++
	r.flat = append(r.flat, runState{
		Calls:   1,
		Cost:    costMicroUSD,
		Outcome: Kept[int32, seq]{Value: r.syms.InternString(outcome)},
	})
	r.sync()
}

// AddBatch folds every row of b, whose string ids come from RunSymbols and
// Symbols, row i at the current position + i; the position advances by
// b.Len. The columns of Fields must be present.
func (r *Reducer) AddBatch(b *calls.Batch) {
	r.sync()
	n := b.Len
	if n == 0 {
		return
	}
	if !b.HasRunID || r.windowed || r.grouped {
		var groups []int32
		if r.grouped {
			groups = b.Strings(r.by)
		}
		f := r.Fields()
		for i := range n {
			var run int32 = -1
			if b.HasRunID {
				run = b.RunID[i]
			}
			var g, agent int32
			var ts int64
			if groups != nil {
				g = groups[i]
			}
			if f.Has(calls.FieldTSMillis) {
				ts = b.TSMillis[i]
			}
			if f.Has(calls.FieldAgentID) {
				agent = b.AgentID[i]
			}
			r.addRow(run, ts, b.Decision[i], b.CostMicroUSD[i], b.Step[i], agent, b.Outcome[i], g, r.pos+uint64(i))
		}
		r.pos += uint64(n)
		return
	}
	// The hot path: no window, no grouping, runs known. A CostOnly
	// reducer's batches carry neither agents nor times.
	r.stats.Calls += int64(n)
	runs, class, pos := r.runs, r.class, r.pos
	r.pos += uint64(n)
	run, dec, cost := b.RunID[:n], b.Decision[:n], b.CostMicroUSD[:n]
	step, out := b.Step[:n], b.Outcome[:n]
	var ts []int64
	var agent []int32
	if !r.opts.CostOnly {
		ts, agent = b.TSMillis[:n], b.AgentID[:n]
	}
	base := unsafe.Pointer(unsafe.SliceData(runs))
	prefetch.Indexed(base, run[:min(n, prefetchAhead)], stateShift)
	for i := range n {
		if i%prefetchAhead == 0 && i+prefetchAhead < n {
			prefetch.Indexed(base, run[i+prefetchAhead:min(n, i+2*prefetchAhead)], stateShift)
		}
		var a int32
		var t int64
		if agent != nil {
			a, t = agent[i], ts[i]
		}
		rs, cls, p := &runs[run[i]], class[dec[i]], seq{pos + uint64(i)}
		if !rs.Add(cls, cost[i], step[i], p, out[i], a, t) {
			r.saturate(rs, run[i], cls, cost[i], step[i], p, out[i], a, t)
		}
	}
}

// prefetchAhead is how many rows ahead of the fold AddBatch asks the CPU
// to load run states: far enough that a state is in cache when its row
// comes, near enough that the states prefetched fit in L1 and L2.
const prefetchAhead = 256

func (r *Reducer) addRow(run int32, ts int64, dec int32, cost int64, step uint32, agent, out, group int32, pos uint64) {
	r.stats.Calls++
	if r.windowed && (ts < r.from || ts >= r.to) {
		r.stats.OutsideWindow++
		return
	}
	cls := r.class[dec]
	var rs *runState
	if run < 0 {
		if out == 0 {
			r.stats.DroppedUntagged++
			return
		}
		r.anon = append(r.anon, runState{})
		r.anonGrp = append(r.anonGrp, group)
		rs = &r.anon[len(r.anon)-1]
	} else {
		rs = &r.runs[run]
	}
	if !rs.Add(cls, cost, step, seq{pos}, out, agent, ts) {
		r.saturate(rs, run, cls, cost, step, seq{pos}, out, agent, ts)
	}
	if r.grouped && run >= 0 {
		key := uint64(run)<<32 | uint64(uint32(group))
		g := r.groups[key]
		if g == nil {
			g = &groupAcc{}
			r.groups[key] = g
		}
		g.calls++
		if cls == calls.ClassBlocked {
			g.blocked++
		} else {
			r.addCost(&g.cost, cost, run)
		}
	}
}

// saturate folds a call whose cost overflows rs's (Run.Add refused it):
// the cost saturates and becomes r's Err (addCost), the rest of the call
// is folded as Add would.
func (r *Reducer) saturate(rs *runState, run int32, cls calls.Class, cost int64, step uint32, pos seq, out, agent int32, ts int64) {
	r.addCost(&rs.Cost, cost, run)
	rs.Add(cls, 0, step, pos, out, agent, ts)
}
