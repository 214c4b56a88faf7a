package partstate

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/verdryx/verdryx/outcome"
)

// Aggregate is the union of partition states and the tables of their
// folded days: every run is in exactly one partition, so the union is the
// whole fleet's reduction state over the retained days.
type Aggregate struct {
	Parts map[int]*State
	// Tables holds the encoded tables of the folded days, by partition and
	// day: decoded one partition at a time (each), so a report over weeks
	// of a busy fleet holds one partition's run states at a time.
	Tables map[int]map[int32][]byte
	// Read is the days whose tables were read (ReadAggregateFor): a
	// report over other days is refused.
	Read DayWindow
}

// DayWindow is a report window: the days [from, to) it reaches into
// (whole or in part), and its bounds [fromMs, toMs) in ts_millis; or
// every day.
type DayWindow struct {
	from, to     int64 // days; int64, so that to can be past the last int32 day
	fromMs, toMs int64
	on           bool // false: every day
}

// AllDays is the window of an all-time report.
func AllDays() DayWindow { return DayWindow{} }

// Has reports whether day d is in w, whole or in part.
func (w DayWindow) Has(d int32) bool { return !w.on || (int64(d) >= w.from && int64(d) < w.to) }

// cuts reports whether w holds part of day d only.
func (w DayWindow) cuts(d int32) bool {
	return w.on && w.Has(d) && (int64(d)*DayMillis < w.fromMs || (int64(d)+1)*DayMillis > w.toMs)
}

// hasHour reports whether hour h of day d is in w.
func (w DayWindow) hasHour(d int32, h int) bool {
	t := int64(d)*DayMillis + int64(h)*hourMillis
	return !w.on || (t >= w.fromMs && t < w.toMs)
}

// covers reports whether every day of v is in w.
func (w DayWindow) covers(v DayWindow) bool {
	return !w.on || (v.on && v.from >= w.from && v.to <= w.to)
}

// String describes w for errors and logs.
func (w DayWindow) String() string {
	if !w.on {
		return "every day"
	}
	from, to := "the first day", "the last day"
	if w.from != math.MinInt32+1 {
		from = DayString(int32(w.from))
	}
	if w.to <= math.MaxInt32 {
		to = "the day before " + DayString(int32(w.to))
	}
	return "the days from " + from + " to " + to
}

// Partitions returns the partitions the aggregate holds, ascending.
func (g *Aggregate) Partitions() []int { return slices.Sorted(maps.Keys(g.Parts)) }

// each calls fn with every partial run state of the aggregate (in memory
// or in a folded day's table) and its partition and day, then with every
// day's dropped untagged calls (name "", a nil state and their count),
// partition by partition in ascending order, and done(p) after each
// partition. It fails on a table that does not decode.
func (g *Aggregate) each(fn func(p int, day int32, name string, a *runAgg, dropped uint64), done func(p int)) error {
	if g.Read.on {
		return fmt.Errorf("the aggregate holds the tables of %s only", g.Read)
	}
	for _, p := range g.Partitions() {
		if err := g.eachOf(p, AllDays(), fn, nil); err != nil {
			return err
		}
		if done != nil {
			done(p)
		}
	}
	return nil
}

// eachOf is each for partition p alone (without done). The tables of
// folded days outside w are not decoded: outside is called with each
// one's calls instead (the count its reference holds). The name and
// state fn is given may be reused after it returns (a table's runs are
// decoded one at a time, their names slices of one string per table):
// fn copies what it keeps, and clones a name it keeps apart.
func (g *Aggregate) eachOf(p int, w DayWindow, fn func(p int, day int32, name string, a *runAgg, dropped uint64), outside func(calls uint64)) error {
	s := g.Parts[p]
	for day, runs := range s.Runs {
		for name, a := range runs {
			fn(p, day, name, a, 0)
		}
	}
	for day, n := range s.dropped {
		fn(p, day, "", nil, n)
	}
	for day, ref := range s.Folded {
		if !w.Has(day) {
			outside(ref.calls)
		}
	}
	for day, b := range g.Tables[p] {
		if !w.Has(day) {
			continue // counted above
		}
		_, dropped, err := eachDayTableRun(b, func(name string, a *runAgg) { fn(p, day, name, a, 0) })
		if err != nil {
			return fmt.Errorf("partition %d day %s: %w", p, DayString(day), err)
		}
		if dropped > 0 {
			fn(p, day, "", nil, dropped)
		}
	}
	return nil
}

// Calls returns how many calls the aggregate holds (dropped untagged
// independent calls included; late calls, never applied, not).
func (g *Aggregate) Calls() int64 {
	var n uint64
	for _, s := range g.Parts {
		for _, runs := range s.Runs {
			for _, a := range runs {
				n += a.Calls
			}
		}
		for _, d := range s.dropped {
			n += d
		}
		for _, ref := range s.Folded {
			n += ref.calls
		}
	}
	return int64(n)
}

// Late returns the calls the partitions refused because their day had
// been pruned at the retention: reported, never counted.
func (g *Aggregate) Late() int64 {
	var n uint64
	for _, s := range g.Parts {
		n += s.late
	}
	return int64(n)
}

// Runs returns each run's call count (independent calls not included).
// It fails on a day table that does not decode.
func (g *Aggregate) Runs() (map[string]uint64, error) {
	out := map[string]uint64{}
	err := g.each(func(_ int, _ int32, name string, a *runAgg, _ uint64) {
		if name, _ = splitName(name); a == nil || name[0] != RunPrefix {
			return
		}
		if _, ok := out[name[1:]]; !ok {
			out[strings.Clone(name[1:])] = 0
		}
		out[name[1:]] += a.Calls
	}, nil)
	return out, err
}

// WindowDays returns opts' time window (every day when it has none), or
// an error when it does not start and end on the hour: the fleet keeps
// its state per hour (and per day where the calls are older than the
// hours kept; a window that cuts such a day fails in the Reducer).
func WindowDays(opts outcome.Options) (DayWindow, error) {
	win := DayWindow{from: math.MinInt32 + 1, to: math.MaxInt32 + 1, fromMs: math.MinInt64, toMs: math.MaxInt64}
	for _, w := range []struct {
		name string
		t    time.Time
		ms   *int64
	}{{"the window's start", opts.From, &win.fromMs}, {"the window's end", opts.To, &win.toMs}} {
		if w.t.IsZero() {
			continue
		}
		win.on = true
		ms := w.t.UnixMilli()
		if ms%hourMillis != 0 || w.t.Nanosecond()%1e6 != 0 {
			return DayWindow{}, fmt.Errorf("%s %s: %w", w.name, w.t.UTC().Format(time.RFC3339Nano), ErrWindowNotWholeHours)
		}
		*w.ms = ms
	}
	if !win.on {
		return AllDays(), nil
	}
	if win.fromMs != math.MinInt64 {
		win.from = int64(DayOf(win.fromMs))
	}
	if win.toMs != math.MaxInt64 {
		win.to = int64(DayOf(win.toMs-1)) + 1
	}
	return win, nil
}

// ErrWindowNotWholeHours marks a report window that does not start and
// end on the hour.
var ErrWindowNotWholeHours = errors.New("the fleet keeps its state per UTC hour: a report from it starts and ends on the hour (a date, or a time ending :00:00Z)")

// ErrWindowCutsWholeDay marks a report window that starts or ends inside
// a day the fleet keeps whole.
var ErrWindowCutsWholeDay = errors.New("the window starts or ends inside a day the fleet keeps whole, not by the hour (calls that reached the workers longer after their ts than the hours they keep, as in a replay of older traces): start and end it at a midnight UTC")

// Reducer returns an outcome.Reducer holding exactly the aggregate's
// calls in opts' time window (starting and ending on the hour; none:
// all): each run's partial states of the window's days and hours are
// merged and added as the run's state (outcome.AddRun), and the calls of
// other days and hours and the untagged independent calls dropped are
// counted in its stats, so the reducer's reports and stats equal those of
// reducing the original calls with the same options. Cost is O(partial
// states). A grouped report (opts.By) is refused: a run's state does not
// split its calls by agent, key or model.
func (g *Aggregate) Reducer(opts outcome.Options) (*outcome.Reducer, error) {
	w, err := WindowDays(opts)
	if err != nil {
		return nil, err
	}
	if !g.Read.covers(w) {
		return nil, fmt.Errorf("a report of %s from an aggregate holding the tables of %s only", w, g.Read)
	}
	if opts.By != "" {
		return nil, fmt.Errorf("a report grouped by %s: the partitions keep each run's state whole, not its calls split by %s", opts.By, opts.By)
	}
	r, err := outcome.NewReducer(opts)
	if err != nil {
		return nil, err
	}
	// Partition by partition, in ascending order: a run is in one
	// partition, so its partial states are all merged by the partition's
	// end. The next partitions are merged while one is fed to r, in
	// order; two merges at a time (reportMergesAhead) use both cores of a
	// small machine and bound the memory: all merged side by side, the day
	// tables decoded at once took a 10 M-row worker's peak RSS up by ~150
	// MiB, to the 1 GiB goal.
	parts := g.Partitions()
	results := make([]chan partMerge, len(parts))
	for i := range results {
		results[i] = make(chan partMerge, 1)
	}
	ahead := make(chan struct{}, reportMergesAhead)
	go func() {
		for i, p := range parts {
			ahead <- struct{}{}
			go func() { results[i] <- g.mergePart(p, w) }()
		}
	}()
	var st outcome.Stats
	for i := range parts {
		m := <-results[i]
		<-ahead
		if err == nil {
			err = m.err
		}
		for _, name := range m.names {
			if err != nil {
				break // every merge is waited for
			}
			base, hasID := name, name[0] == RunPrefix
			if hasID {
				base = name[1:]
			}
			if err = outcome.AddRun(r, base, hasID, &m.merged[name].Run); err != nil {
				err = fmt.Errorf("partition %d: %w", parts[i], err)
			}
		}
		st.OutsideWindow += int64(m.outside)
		st.DroppedUntagged += int64(m.dropped)
	}
	if err != nil {
		return nil, err
	}
	st.Calls = st.OutsideWindow + st.DroppedUntagged
	r.AddStats(st)
	return r, nil
}

// reportMergesAhead is how many partitions Aggregate.Reducer merges ahead
// of the one it feeds. Two took `serve --once`'s report of the 10 M-row
// bench worker directory from 0.65-0.75 s to 0.44-0.54 s on two cores,
// peak RSS unchanged.
const reportMergesAhead = 2

// partMerge is one partition's part of a report (see Aggregate.Reducer):
// its runs' partial states of the window merged, by name, the names
// sorted, the calls outside the window, and the untagged independent
// calls dropped in it.
type partMerge struct {
	merged  map[string]*runAgg
	names   []string
	outside uint64
	dropped uint64
	err     error
}

// mergePart merges partition p's partial run states of the window w
// (of the days it holds whole, and the hours of the days it cuts); the
// calls of other days and hours count as outside the window. A state of
// a day w cuts that is not kept by the hour fails it
// (ErrWindowCutsWholeDay).
func (g *Aggregate) mergePart(p int, w DayWindow) partMerge {
	m := partMerge{merged: map[string]*runAgg{}}
	eerr := g.eachOf(p, w, func(p int, day int32, name string, a *runAgg, n uint64) {
		if a != nil {
			n = a.Calls
		}
		base, hour := splitName(name)
		switch {
		case m.err != nil:
		case !w.Has(day):
			m.outside += n
		case hour < 0 && w.cuts(day):
			m.err = fmt.Errorf("partition %d day %s: %w", p, DayString(day), ErrWindowCutsWholeDay)
		case hour >= 0 && !w.hasHour(day, hour):
			m.outside += n
		case a == nil || base[0] == droppedCalls:
			m.dropped += n
		default:
			agg := m.merged[base]
			if agg == nil {
				agg = &runAgg{}
				m.merged[strings.Clone(base)] = agg
			}
			if merr := agg.merge(a); merr != nil {
				m.err = fmt.Errorf("partition %d run %q: %w", p, base, merr)
			}
		}
	}, func(n uint64) { m.outside += n })
	if m.err == nil {
		m.err = eerr
	}
	if m.err == nil {
		m.names = slices.Sorted(maps.Keys(m.merged))
	}
	return m
}
