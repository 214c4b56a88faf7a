package outcome

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/verdryx/verdryx/internal/hugepage"
	"github.com/verdryx/verdryx/internal/wire"

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
	// query planner would push the projection down. SLO and MarshalBinary
	// refuse such a reducer, and it merges only with another CostOnly one.
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
type runState struct {
	cost      int64 // micro-USD of non-blocked calls
	lastTS    int64 // latest ts_millis seen
	calls     uint32
	blocked   uint32
	refused   uint32 // blocked + wardryx_deny/hold
	outStep   uint32 // step of the outcome kept
	agentStep uint32
	outcome   int32  // symbol id of the last non-empty outcome, 0 = none
	agent     int32  // symbol id of the agent id kept, 0 = none
	epoch     uint32 // transaction that last saved this state
	outPos    uint64 // position (SetPos) of the outcome kept
	agentPos  uint64 // position of the agent kept
}

// runState is 64 bytes (1<<stateShift), one cache line: an interleaved
// reduction touches the states of rows at random, so its size is its cost
// (the constant below does not compile otherwise).
const stateShift = 6

const _ = -uint(unsafe.Sizeof(runState{}) ^ 1<<stateShift)

// later reports whether a value at (step, pos) replaces one kept at
// (keptStep, keptPos): the greater step wins, then the greater position;
// an equal key (the same row offered again) replaces too, so a sequential
// reduction keeps "later read wins on ties".
func later(step uint32, pos uint64, keptStep uint32, keptPos uint64) bool {
	return step > keptStep || (step == keptStep && pos >= keptPos)
}

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
	epoch          uint32
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
	tx      txn
	err     error // first sum overflow (checked.go)
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

// CurrentPos returns the position the next call offered will take.
func (r *Reducer) CurrentPos() uint64 { return r.pos }

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
			return nil, fmt.Errorf("time window: --to %s is not after --from %s",
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

// AddN folds n calls equal to c, as n calls of Add(c) would (positions
// included: the n calls take the next n positions), in constant time when
// c has a run id, no cost, and the reducer no grouping; a run's state
// rebuilt from its counts (a fleet's report) is fed this way.
func (r *Reducer) AddN(c calls.Call, n uint64) {
	if n == 0 {
		return
	}
	if !c.HasRunID || c.CostMicroUSD != 0 || r.grouped {
		for range n {
			r.Add(c)
		}
		return
	}
	run := r.runSyms.InternString(c.RunID)
	dec := r.syms.InternString(c.Decision)
	out := r.syms.InternString(c.Outcome)
	agent := r.syms.InternString(c.AgentID)
	r.sync()
	last := r.pos + n - 1
	r.pos += n
	r.stats.Calls += int64(n)
	if r.windowed && (c.TSMillis < r.from || c.TSMillis >= r.to) {
		r.stats.OutsideWindow += int64(n)
		return
	}
	step := c.Step
	if !c.HasStep {
		step = 0
	}
	rs := &r.runs[run]
	r.touch(run, rs)
	// lastTS takes ts when it is newer or when one of the calls makes
	// the (wrapping) count 1.
	toOne := uint64(uint32(1 - rs.calls))
	if toOne == 0 {
		toOne = 1 << 32
	}
	if c.TSMillis > rs.lastTS || toOne <= n {
		rs.lastTS = c.TSMillis
	}
	rs.calls += uint32(n)
	cls := r.class[dec]
	if cls == calls.ClassBlocked {
		rs.blocked += uint32(n)
	}
	if cls != calls.ClassAllowed {
		rs.refused += uint32(n)
	}
	// later is monotone in the position: if any of the n calls replaces
	// the value kept, the last one does, and it is kept.
	if out != 0 && later(step, last, rs.outStep, rs.outPos) {
		rs.outcome, rs.outStep, rs.outPos = out, step, last
	}
	if agent != 0 && later(step, last, rs.agentStep, rs.agentPos) {
		rs.agent, rs.agentStep, rs.agentPos = agent, step, last
	}
}

// AddRecord folds a flat {outcome, cost_usd} record, already reduced to a
// run: it counts as one run of one call. An empty outcome reads as untagged.
func (r *Reducer) AddRecord(outcome string, costMicroUSD int64) {
	r.stats.Records++
	r.pos++
	r.flat = append(r.flat, runState{
		calls:   1,
		cost:    costMicroUSD,
		outcome: r.syms.InternString(outcome),
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
	runs, class, epoch, pos := r.runs, r.class, r.tx.epoch, r.pos
	r.pos += uint64(n)
	run, dec, cost := b.RunID[:n], b.Decision[:n], b.CostMicroUSD[:n]
	step, out := b.Step[:n], b.Outcome[:n]
	full := !r.opts.CostOnly
	var ts []int64
	var agent []int32
	if full {
		ts, agent = b.TSMillis[:n], b.AgentID[:n]
	}
	base := unsafe.Pointer(unsafe.SliceData(runs))
	prefetch.Indexed(base, run[:min(n, prefetchAhead)], stateShift)
	for i := range n {
		if i%prefetchAhead == 0 && i+prefetchAhead < n {
			prefetch.Indexed(base, run[i+prefetchAhead:min(n, i+2*prefetchAhead)], stateShift)
		}
		rs := &runs[run[i]]
		if rs.epoch != epoch {
			r.touch(run[i], rs)
		}
		rs.calls++
		cls := class[dec[i]]
		if cls != calls.ClassAllowed {
			rs.refused++
		}
		if cls == calls.ClassBlocked {
			rs.blocked++
		} else if s, ok := wire.AddInt64(rs.cost, cost[i]); ok {
			rs.cost = s
		} else {
			r.addCost(&rs.cost, cost[i], run[i])
		}
		st, p := step[i], pos+uint64(i)
		if o := out[i]; o != 0 && later(st, p, rs.outStep, rs.outPos) {
			rs.outcome, rs.outStep, rs.outPos = o, st, p
		}
		if !full {
			continue
		}
		if a := agent[i]; a != 0 && later(st, p, rs.agentStep, rs.agentPos) {
			rs.agent, rs.agentStep, rs.agentPos = a, st, p
		}
		if t := ts[i]; t > rs.lastTS || rs.calls == 1 {
			rs.lastTS = t
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
		r.touch(run, rs)
	}
	rs.calls++
	if cls == calls.ClassBlocked {
		rs.blocked++
	} else {
		r.addCost(&rs.cost, cost, run)
	}
	if cls != calls.ClassAllowed {
		rs.refused++
	}
	if out != 0 && later(step, pos, rs.outStep, rs.outPos) {
		rs.outcome, rs.outStep, rs.outPos = out, step, pos
	}
	if agent != 0 && later(step, pos, rs.agentStep, rs.agentPos) {
		rs.agent, rs.agentStep, rs.agentPos = agent, step, pos
	}
	if ts > rs.lastTS || rs.calls == 1 {
		rs.lastTS = ts
	}
	if r.grouped && run >= 0 {
		key := uint64(run)<<32 | uint64(uint32(group))
		g := r.groups[key]
		if g == nil {
			g = &groupAcc{epoch: r.tx.epoch}
			r.groups[key] = g
			if r.tx.open {
				r.tx.groups = append(r.tx.groups, undoGroup{key: key})
			}
		} else if g.epoch != r.tx.epoch {
			if r.tx.open {
				r.tx.groups = append(r.tx.groups, undoGroup{key: key, had: true, acc: *g})
			}
			g.epoch = r.tx.epoch
		}
		g.calls++
		if cls == calls.ClassBlocked {
			g.blocked++
		} else {
			r.addCost(&g.cost, cost, run)
		}
	}
}

type undoGroup struct {
	key uint64
	had bool
	acc groupAcc
}

// txn is the undo state of an open Begin.
type txn struct {
	open    bool
	epoch   uint32
	runs    []int32
	saved   []runState
	groups  []undoGroup
	anonLen int
	flatLen int
	stats   Stats
	pos     uint64
}

// Begin opens a transaction: everything added until Commit can be undone by
// Rollback. The consumer wraps each segment in one so a segment that turns
// out corrupt halfway is not half counted. Memory is one saved state per
// run touched. Transactions do not nest.
func (r *Reducer) Begin() {
	t := &r.tx
	t.open = true
	t.epoch++
	t.runs, t.saved, t.groups = t.runs[:0], t.saved[:0], t.groups[:0]
	t.anonLen = len(r.anon)
	t.flatLen = len(r.flat)
	t.stats = r.stats
	t.pos = r.pos
}

// Commit keeps everything added since Begin.
func (r *Reducer) Commit() {
	r.tx.open = false
	r.tx.runs, r.tx.saved, r.tx.groups = r.tx.runs[:0], r.tx.saved[:0], r.tx.groups[:0]
}

// Rollback undoes everything added since Begin. Strings interned meanwhile
// stay interned (a run with no calls is not reported).
func (r *Reducer) Rollback() {
	t := &r.tx
	if !t.open {
		return
	}
	for i, run := range t.runs {
		r.runs[run] = t.saved[i]
	}
	for i := len(t.groups) - 1; i >= 0; i-- {
		g := t.groups[i]
		if g.had {
			*r.groups[g.key] = g.acc
		} else {
			delete(r.groups, g.key)
		}
	}
	r.anon = r.anon[:t.anonLen]
	r.anonGrp = r.anonGrp[:t.anonLen]
	r.flat = r.flat[:t.flatLen]
	r.stats = t.stats
	r.pos = t.pos
	t.open = false
	t.runs, t.saved, t.groups = t.runs[:0], t.saved[:0], t.groups[:0]
}

// touch saves run's state the first time a transaction changes it.
func (r *Reducer) touch(run int32, rs *runState) {
	if rs.epoch != r.tx.epoch {
		rs.epoch = r.tx.epoch
		if r.tx.open {
			r.tx.runs = append(r.tx.runs, run)
			r.tx.saved = append(r.tx.saved, *rs)
		}
	}
}
