package tracegen

import (
	"fmt"
	"github.com/verdryx/verdryx/calls"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
)

// FixtureSegment is one segment file of a fixture.
type FixtureSegment struct {
	Name   string
	Layout Layout
	Opts   Options
	Calls  []calls.Call
	// CorruptRowGroup, when >= 0 (set with Corrupt), overwrites the first
	// page header of that row group's first column chunk with 0xff bytes.
	CorruptRowGroup int
}

// Fixture is a small trace directory with a known reduction.
type Fixture struct {
	Name     string
	Segments []FixtureSegment
	// Extra are non-segment files (name -> content) a replay must ignore.
	Extra map[string]string
}

// fixtureStart is the ts_millis origin of every fixture: 2026-11-02T00:00:00Z.
func fixtureStart() int64 { return time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).UnixMilli() }

// c builds a call at minute min of the fixture day.
func c(minute int64, run string, step uint32, decision string, cost int64, tag string) calls.Call {
	return calls.Call{
		TSMillis: fixtureStart() + minute*60_000,
		RunID:    run, HasRunID: true,
		Model: "model-small", Decision: decision,
		InputTokens: 100, OutputTokens: 10,
		CostMicroUSD: cost, Step: step, HasStep: true,
		Outcome: tag, Unit: "tokens",
	}
}

func seg(name string, layout Layout, cl ...calls.Call) FixtureSegment {
	return FixtureSegment{Name: name, Layout: layout, Calls: cl, CorruptRowGroup: -1}
}

func with(cl []calls.Call, fn func(*calls.Call)) []calls.Call {
	for i := range cl {
		fn(&cl[i])
	}
	return cl
}

func u32(v uint32) *uint32 { return &v }

// Fixtures returns the committed fixtures of testdata/traces, each a
// directory named after the fixture. The comments give the reduction by
// hand; the golden reports must agree.
func Fixtures() []Fixture {
	const agentA = "agent://acme.example/support/bot-a"
	blocked9 := []string{"budget_exceeded", "policy_violation", "loop_detected", "killed", "wasm_policy",
		"taint_blocked", "dlp_blocked", "unit_budget_exceeded", "identity_mismatch"}
	var b3 []calls.Call
	for i, d := range blocked9 {
		b3 = append(b3, c(int64(20+i), "b3", uint32(i), d, 1000, ""))
	}
	b3 = append(b3, c(30, "b3", 9, "wardryx_hold", 7, "abandoned"))

	// rowgroups: three runs of five calls interleaved, cost 1..5 each.
	var rg []calls.Call
	for step := range uint32(5) {
		for i, run := range []string{"g1", "g2", "g3"} {
			tag := ""
			if step == 4 {
				tag = []string{"case_resolved", "case_resolved", "abandoned"}[i]
			}
			if run == "g3" && step == 2 {
				tag = "case_resolved" // overridden by step 4
			}
			call := c(int64(step)*3+int64(i), run, step, "allow", int64(step)+1, tag)
			call.ToolCalls = u32(step % 2)
			rg = append(rg, call)
		}
	}
	rgSeg := seg(SegmentName(7, 0x10, 1), Current, rg...)
	rgSeg.Opts = Options{RowGroupRows: 4, PageBytes: 64}

	corrupt := seg(SegmentName(9, 0x20, 2), Current,
		c(10, "c2", 0, "allow", 20, ""), c(11, "c2", 1, "allow", 30, ""),
		c(12, "c2", 2, "allow", 40, ""), c(13, "c2", 3, "allow", 50, "abandoned"))
	corrupt.Opts = Options{RowGroupRows: 2}
	corrupt.CorruptRowGroup = 1

	return []Fixture{
		{
			// abandoned 1 run 2 calls $0.000120; case_resolved 2 runs 5 calls
			// $0.000850; (untagged) 1 run 2 calls $0.000030; overall 4 runs
			// 9 calls $0.001000; per resolved $0.000500.
			Name: "basic",
			Segments: []FixtureSegment{seg(SegmentName(0x1a2b, 0x187a0000, 0), Current, with([]calls.Call{
				c(0, "r1", 0, "allow", 100, ""), c(1, "r1", 1, "allow", 200, ""), c(2, "r1", 2, "allow", 300, "case_resolved"),
				c(3, "r2", 0, "allow", 50, ""), c(4, "r2", 1, "allow", 70, "abandoned"),
				c(5, "r3", 0, "allow", 10, ""), c(6, "r3", 1, "allow", 20, ""),
				{TSMillis: fixtureStart() + 7*60_000, RunID: "r4", HasRunID: true, Model: "model-large", Decision: "cache_hit",
					CostMicroUSD: 0, SavedMicroUSD: 400, HasStep: true, ToolCalls: u32(0)},
				c(8, "r4", 1, "allow", 250, "case_resolved"),
			}, func(x *calls.Call) { x.AgentID = agentA; x.KeyID = "key-1" })...)},
		},
		{
			// b1: 3 calls, 1 blocked (9000 avoided, not costed), $0.000300,
			// case_resolved. b2: wardryx_deny is costed: $0.000600,
			// escalated. b3: the nine blocked decisions (none costed) and a
			// costed wardryx_hold: 10 calls, 9 blocked, $0.000007, abandoned.
			Name: "blocked",
			Segments: []FixtureSegment{seg(SegmentName(1, 1, 0), Current, append([]calls.Call{
				c(0, "b1", 0, "allow", 100, ""), c(1, "b1", 1, "budget_exceeded", 9000, ""), c(2, "b1", 2, "allow", 200, "case_resolved"),
				c(10, "b2", 0, "wardryx_deny", 500, ""), c(11, "b2", 1, "allow", 100, "escalated"),
			}, b3...)...)},
		},
		{
			// Segment 0xff is replayed before 0x100 (numeric, not lexical
			// order). s1: escalated at step 3 beats case_resolved at step 2
			// read later. s2: case_resolved at step 7 (second segment) beats
			// abandoned at step 5. s3: an empty tag never overrides.
			// case_resolved 1 run 3 calls $0.000018; escalated 2 runs 5 calls
			// $0.000063; overall $0.000081.
			Name: "split",
			Segments: []FixtureSegment{
				seg(SegmentName(1, 0x100, 0), Current,
					c(30, "s1", 2, "allow", 20, "case_resolved"),
					c(31, "s2", 7, "allow", 7, "case_resolved"), c(32, "s2", 6, "allow", 6, "")),
				seg(SegmentName(1, 0xff, 1), Current,
					c(0, "s1", 3, "allow", 30, "escalated"), c(1, "s1", 1, "allow", 10, ""),
					c(2, "s2", 5, "allow", 5, "abandoned"),
					c(3, "s3", 0, "allow", 1, "escalated"), c(4, "s3", 1, "allow", 2, "")),
			},
		},
		{
			// Nullable columns 9-16 and step. n1: null agent/outcome/tool_calls
			// then a tagged call: case_resolved, $0.000150. n2: no step at
			// all, so encounter order decides: escalated (the later of two
			// tags; a null tag never overrides), $0.000007.
			Name: "nulls",
			Segments: []FixtureSegment{seg(SegmentName(2, 5, 0), Nullable, append([]calls.Call{
				c(0, "n1", 0, "allow", 100, ""),
				with([]calls.Call{c(1, "n1", 1, "allow", 50, "case_resolved")}, func(x *calls.Call) {
					x.AgentID = agentA
					x.ToolCalls = u32(0)
					x.SavedMicroUSD = 12
				})[0]},
				with([]calls.Call{c(2, "n2", 0, "allow", 1, "abandoned"), c(3, "n2", 0, "allow", 2, "escalated"), c(4, "n2", 0, "allow", 4, "")},
					func(x *calls.Call) { x.HasStep = false })...,
			)...)},
		},
		{
			// An 8-column segment (no outcome column) then a current one:
			// o1 is tagged by its later call, case_resolved $0.000300 over 3
			// calls; o2 never is: (untagged) $0.000040.
			Name: "old8",
			Segments: []FixtureSegment{
				seg(SegmentName(3, 1, 0), Old8,
					c(0, "o1", 0, "allow", 100, "ignored: no column"), c(1, "o1", 1, "allow", 100, ""), c(2, "o2", 0, "allow", 40, "")),
				seg(SegmentName(3, 2, 0), Current, c(3, "o1", 2, "allow", 100, "case_resolved")),
			},
		},
		{
			// A file without run_id: each row is its own run; the untagged
			// row is dropped; the killed row is counted, blocked, not costed.
			// Plus run x1 from a current segment. abandoned 1 run 1 call 1
			// blocked $0; case_resolved 3 runs $0.000600; 1 dropped.
			Name: "norunid",
			Segments: []FixtureSegment{
				seg(SegmentName(4, 1, 0), NoRunID,
					c(0, "", 0, "allow", 100, "case_resolved"), c(1, "", 0, "allow", 999, ""),
					c(2, "", 0, "killed", 500, "abandoned"), c(3, "", 0, "allow", 300, "case_resolved")),
				seg(SegmentName(4, 2, 0), Current, c(4, "x1", 0, "allow", 200, "case_resolved")),
			},
		},
		{
			// 15 rows in row groups of 4 and tiny pages. g3's case_resolved
			// at step 2 is overridden by abandoned at step 4 three row groups
			// later. abandoned 1 run 5 calls $0.000015; case_resolved 2 runs
			// 10 calls $0.000030; per resolved $0.0000225. README.txt and a
			// misnamed file are ignored.
			Name:     "rowgroups",
			Segments: []FixtureSegment{rgSeg},
			Extra: map[string]string{
				"README.txt":                  "not a segment\n",
				"calls-zz-1-00000001.parquet": "not hex: ignored\n",
				"calls-1-2-3.parquet":         "seq shorter than 8 digits: ignored\n",
			},
		},
		{
			// The second segment's row group 1 is corrupt: the segment is
			// skipped whole (its row group 0 is rolled back) and counted;
			// c1 alone remains: case_resolved $0.000100.
			Name: "corrupt",
			Segments: []FixtureSegment{
				seg(SegmentName(9, 0x10, 1), Current, c(0, "c1", 0, "allow", 100, "case_resolved")),
				corrupt,
			},
		},
		sloFixture(),
	}
}

// sloFixture: four agents and unattributed runs, two calls per run, spread
// over 28 days. good: 40 resolved runs; bad: 40 runs, 20 abandoned, 10 with
// a wardryx_deny call, one costing 100x; few: 5 runs (not measured);
// "bot-legacy" (not a canonical agent id): 25 abandoned runs; 10
// unattributed resolved runs.
func sloFixture() Fixture {
	type group struct {
		agent string
		runs  int
	}
	groups := []group{
		{"agent://acme.example/support/good", 40},
		{"agent://acme.example/support/bad", 40},
		{"agent://acme.example/support/few", 5},
		{"bot-legacy", 25},
		{"", 10},
	}
	total := 0
	for _, g := range groups {
		total += g.runs
	}
	// Runs are dealt round-robin over the groups so every subject has runs
	// throughout the span, the burn window included.
	type slot struct{ g, i int }
	var order []slot
	for i := 0; len(order) < total; i++ {
		for gi, g := range groups {
			if i < g.runs {
				order = append(order, slot{gi, i})
			}
		}
	}
	spanMin := int64(28 * 24 * 60)
	var cl []calls.Call
	for n, sl := range order {
		g, i := groups[sl.g], sl.i
		minute := spanMin * int64(n) / int64(total-1)
		run := fmt.Sprintf("slo-%03d", n)
		tag, dec, cost := "case_resolved", "allow", int64(50)
		switch g.agent {
		case "agent://acme.example/support/bad":
			if i%2 == 1 {
				tag = "abandoned"
			}
			if i%4 == 0 {
				dec = "wardryx_deny"
			}
			if i == 7 {
				cost = 5000
			}
		case "bot-legacy":
			tag = "abandoned"
		}
		a := c(minute, run, 0, dec, cost, "")
		b := c(minute, run, 1, "allow", 50, tag)
		a.AgentID, b.AgentID = g.agent, g.agent
		cl = append(cl, a, b)
	}
	return Fixture{Name: "slo", Segments: []FixtureSegment{seg(SegmentName(5, 1, 0), Current, cl...)}}
}

// WriteFixture writes fx's segments and extra files into dir, replacing
// files of the same names.
func WriteFixture(dir string, fx Fixture) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("fixture %s: %w", fx.Name, err)
	}
	for _, s := range fx.Segments {
		path := filepath.Join(dir, s.Name)
		if err := WriteFile(path, s.Layout, s.Calls, s.Opts); err != nil {
			return fmt.Errorf("fixture %s: %s: %w", fx.Name, s.Name, err)
		}
		if s.CorruptRowGroup >= 0 {
			if err := CorruptRowGroup(path, s.CorruptRowGroup); err != nil {
				return fmt.Errorf("fixture %s: %s: %w", fx.Name, s.Name, err)
			}
		}
	}
	for name, content := range fx.Extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("fixture %s: %w", fx.Name, err)
		}
	}
	return nil
}

// CorruptRowGroup overwrites the first 16 bytes of the first data page of
// row group rg's first column chunk with 0xff, leaving the footer intact:
// the file opens, and fails only when that row group is read.
func CorruptRowGroup(path string, rg int) error { return CorruptColumnChunk(path, rg, "") }

// CorruptColumnChunk is CorruptRowGroup for the chunk of the named column
// (the first column when column is ""): a reader fails on that row group
// only if it reads that column.
func CorruptColumnChunk(path string, rg int, column string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("corrupt segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("corrupt segment: %w", err)
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return fmt.Errorf("corrupt segment: %w", err)
	}
	groups := pf.Metadata().RowGroups
	if rg >= len(groups) {
		return fmt.Errorf("corrupt segment: row group %d of %d", rg, len(groups))
	}
	col := -1
	for i, c := range groups[rg].Columns {
		if column == "" || strings.Join(c.MetaData.PathInSchema, ".") == column {
			col = i
			break
		}
	}
	if col < 0 {
		return fmt.Errorf("corrupt segment: %s: no column %q", path, column)
	}
	m := &groups[rg].Columns[col].MetaData
	off := m.DataPageOffset
	if d := m.DictionaryPageOffset; d > 0 && d < off {
		off = d
	}
	junk := make([]byte, 16)
	for i := range junk {
		junk[i] = 0xff
	}
	if _, err := f.WriteAt(junk, off); err != nil {
		return fmt.Errorf("corrupt segment: %w", err)
	}
	return nil
}
