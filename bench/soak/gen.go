package soak

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/tracegen"
)

// Fleet shapes the simulated fleet: calls spread evenly over each day,
// InFlight runs at a time, each starting when another ends, so runs
// start and end all day and some span midnight; a LateFraction of the
// calls is delivered one to three days after its ts (a straggler: the
// run it belongs to may be long over, its outcome already counted). A
// straggler due after the last day is never delivered (it arrives after
// the soak ends), so the last day's delivery is like any other's.
type Fleet struct {
	Days        int
	CallsPerDay int
	// InFlight is the number of runs in flight at once (default 300).
	InFlight int
	// MeanCallsPerRun sets run lengths, uniform in [1, 2*mean-1]
	// (default 20).
	MeanCallsPerRun int
	// LateFraction of the calls is delivered late (default 0.01).
	LateFraction float64
	// Agents is the number of agent ids (default 20); 1 run in 20 has none.
	Agents int
	// SegmentRows cuts a day's delivery into segments (default 50,000).
	SegmentRows int
	// Start is the midnight (UTC) the first day begins at.
	Start time.Time
	Seed  uint64
}

func (f *Fleet) defaults() {
	if f.InFlight <= 0 {
		f.InFlight = 300
	}
	if f.MeanCallsPerRun <= 0 {
		f.MeanCallsPerRun = 20
	}
	if f.LateFraction == 0 {
		f.LateFraction = 0.01
	}
	if f.Agents <= 0 {
		f.Agents = 20
	}
	if f.SegmentRows <= 0 {
		f.SegmentRows = 50_000
	}
}

// MaxLateDays is the most days a late call is delivered after its own.
const MaxLateDays = 3

// Delivery is what the generator wrote for one simulated day.
type Delivery struct {
	Day int
	// Dir holds the segments delivered that day.
	Dir string
	// Rows delivered, and of them Late: calls of an earlier day.
	Rows, Late int64
	// Held is the number of this day's calls held back for a later day.
	Held  int64
	Bytes int64
}

// Generator writes one directory of segments per simulated day, in day
// order (Next). Its output is a pure function of the Fleet. Not safe for
// concurrent use.
type Generator struct {
	f    Fleet
	root string
	rng  *rand.Rand
	live []genRun
	next int64
	day  int
	held map[int][]calls.Call // by delivery day
	// beyond counts the calls due after the last day (never delivered).
	beyond int64
}

type genRun struct {
	id, agent, model, key string
	left                  int
	step                  uint32
	outcome, early        string
}

// NewGenerator prepares a generator writing under root (which must exist).
func NewGenerator(root string, f Fleet) (*Generator, error) {
	f.defaults()
	if f.Days <= 0 || f.CallsPerDay <= 0 {
		return nil, errors.New("soak: want positive Days and CallsPerDay")
	}
	if f.LateFraction < 0 || f.LateFraction >= 1 {
		return nil, fmt.Errorf("soak: late fraction %v: want [0, 1)", f.LateFraction)
	}
	g := &Generator{f: f, root: root, held: map[int][]calls.Call{},
		rng: rand.New(rand.NewPCG(f.Seed, f.Seed^0x5bd1e995))}
	g.live = make([]genRun, f.InFlight)
	for i := range g.live {
		g.live[i] = g.newRun()
	}
	return g, nil
}

func (g *Generator) newRun() genRun {
	g.next++
	models := [...]string{"claude-haiku-4-5", "claude-sonnet-4-5", "gpt-4.1-mini"}
	r := genRun{
		id:    fmt.Sprintf("soak-run-%09d", g.next),
		model: models[g.rng.IntN(len(models))],
		key:   fmt.Sprintf("key-%02d", g.rng.IntN(8)),
		left:  1 + g.rng.IntN(2*g.f.MeanCallsPerRun-1),
	}
	if g.rng.IntN(20) != 0 {
		r.agent = fmt.Sprintf("agent://soak.example/fleet/bot-%02d", g.rng.IntN(g.f.Agents))
	}
	switch p := g.rng.IntN(100); {
	case p < 60:
		r.outcome = "case_resolved"
	case p < 75:
		r.outcome = "escalated"
	case p < 88:
		r.outcome = "abandoned"
	}
	if r.outcome != "" && g.rng.IntN(10) == 0 {
		r.early = "escalated" // overridden by the run's last call
	}
	return r
}

// DayStart returns the midnight day d begins at.
func (g *Generator) DayStart(d int) time.Time { return g.f.Start.AddDate(0, 0, d) }

// Next writes the next day's delivery: that day's calls not held back,
// and the calls of earlier days held for it. It returns false after the
// last day.
func (g *Generator) Next() (Delivery, bool, error) {
	if g.day >= g.f.Days {
		return Delivery{}, false, nil
	}
	d := g.day
	g.day++
	dl := Delivery{Day: d, Dir: filepath.Join(g.root, fmt.Sprintf("day-%02d", d))}
	if err := os.MkdirAll(dl.Dir, 0o755); err != nil {
		return dl, false, fmt.Errorf("soak: %w", err)
	}
	start := g.DayStart(d).UnixMilli()
	const dayMillis = 24 * 3600 * 1000
	out := g.held[d]
	delete(g.held, d)
	dl.Late = int64(len(out))
	for i := range g.f.CallsPerDay {
		c := g.call(start + int64(i)*dayMillis/int64(g.f.CallsPerDay))
		if g.rng.Float64() < g.f.LateFraction {
			dl.Held++
			if late := d + 1 + g.rng.IntN(MaxLateDays); late < g.f.Days {
				g.held[late] = append(g.held[late], c)
			} else {
				g.beyond++
			}
			continue
		}
		out = append(out, c)
	}
	dl.Rows = int64(len(out))
	// Segments are named by the delivery day's time, as a fleet's writer
	// would name them, so the late calls of a day sort with it.
	for seq := 0; seq*g.f.SegmentRows < len(out); seq++ {
		lo, hi := seq*g.f.SegmentRows, min((seq+1)*g.f.SegmentRows, len(out))
		nanos := uint64(start)*1_000_000 + uint64(seq)
		n, err := writeSegment(filepath.Join(dl.Dir, tracegen.SegmentName(0x50a4, nanos, uint64(seq))), out[lo:hi])
		if err != nil {
			return dl, false, err
		}
		dl.Bytes += n
	}
	return dl, true, nil
}

// call draws the next call of the fleet at ts.
func (g *Generator) call(ts int64) calls.Call {
	k := g.rng.IntN(len(g.live))
	r := &g.live[k]
	c := calls.Call{
		TSMillis: ts, RunID: r.id, HasRunID: true, Model: r.model, Decision: "allow",
		InputTokens: uint64(200 + g.rng.IntN(3000)), OutputTokens: uint64(20 + g.rng.IntN(600)),
		Step: r.step, HasStep: true, AgentID: r.agent, KeyID: r.key, Unit: "tokens",
	}
	c.CostMicroUSD = int64(c.InputTokens)/4 + int64(c.OutputTokens)*2
	switch p := g.rng.IntN(1000); {
	case p < 25:
		c.Decision, c.CostMicroUSD = "budget_exceeded", 0
	case p < 35:
		c.Decision = "wardryx_deny"
	case p < 80:
		c.Decision, c.SavedMicroUSD, c.CostMicroUSD = "cache_hit", c.CostMicroUSD, 0
	}
	r.step++
	r.left--
	switch {
	case r.left == 0:
		c.Outcome = r.outcome
		g.live[k] = g.newRun()
	case r.left == 1 && r.early != "":
		c.Outcome = r.early
	}
	return c
}

func writeSegment(path string, rows []calls.Call) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, fmt.Errorf("soak: %w", err)
	}
	w, err := tracegen.NewSegmentWriter(f, tracegen.Current, tracegen.Options{RowGroupRows: 16_384})
	if err == nil {
		err = w.Write(rows)
	}
	if err == nil {
		err = w.Close()
	}
	var n int64
	if fi, serr := f.Stat(); serr == nil {
		n = fi.Size()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, fmt.Errorf("soak: write %s: %w", path, err)
	}
	return n, nil
}
