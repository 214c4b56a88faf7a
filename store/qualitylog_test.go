package store

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
)

// allRows reads every column of every row of the run and baseline tables
// but the AUTOINCREMENT ids, in insertion order: what a store holds of its
// runs and baselines.
func allRows(t *testing.T, st *Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, table := range []string{"eval_runs", "scores", "unanswered", "baselines"} {
		cols, err := columns(context.Background(), st.db, table)
		require.NoError(t, err)
		var keep []string
		for _, c := range cols {
			if c != "id" || table == "eval_runs" || table == "baselines" {
				keep = append(keep, c)
			}
		}
		rows, err := st.db.Query("SELECT quote(" + strings.Join(keep, ") || '|' || quote(") + ") FROM " + table + " ORDER BY rowid")
		require.NoError(t, err)
		for rows.Next() {
			var s string
			require.NoError(t, rows.Scan(&s))
			out[table] = append(out[table], s)
		}
		require.NoError(t, rows.Err())
		rows.Close()
	}
	return out
}

// ship exports a record from st and decodes it as the log carries it.
func ship(t *testing.T, st *Store, kind, id string) LogRecord {
	t.Helper()
	rec, err := st.ExportRecord(context.Background(), kind, id)
	require.NoError(t, err)
	b, err := json.Marshal(rec)
	require.NoError(t, err)
	got, err := DecodeLogRecord(b)
	require.NoError(t, err)
	return got
}

// TestLogRecordReproducesTheRows: a run (graded, unmeasured, typed cases,
// checks, settings, provenance, a request id) and its baseline shipped
// through the log's JSON give another store exactly the rows of the
// first, read back alike through the store and the console's SQL; each
// record applies once, a run already held is not inserted again, and the
// store's position and what it missed are kept.
func TestLogRecordReproducesTheRows(t *testing.T) {
	ctx := context.Background()
	a, pathA := openTest(t)
	b, pathB := openTest(t)
	run := mixedRun("run-shipped", t0)
	run.RequestID, run.Judge = "req-1", "stub"
	run.Settings = &grading.Settings{Judge: "stub", SemanticThreshold: 0.7, TopK: 4}
	run.Scores[0].CostUSD = 0.1 + 0.2 // not exactly representable in decimal
	require.NoError(t, a.SaveRun(ctx, run))
	bl, err := a.CreateBaseline(ctx, run.ID, "v1", t0.Add(time.Minute))
	require.NoError(t, err)
	pending, err := a.Pending(ctx)
	require.NoError(t, err)
	assert.Equal(t, [][2]string{{KindRun, run.ID}, {KindBaseline, bl.ID}}, pending)

	what, err := b.ApplyLog(ctx, 1, 2, ship(t, a, KindRun, run.ID), t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedNew, what)
	what, err = b.ApplyLog(ctx, 2, 2, ship(t, a, KindBaseline, bl.ID), t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedNew, what)

	assert.Equal(t, allRows(t, a), allRows(t, b))
	gotA, err := a.Run(ctx, run.ID)
	require.NoError(t, err)
	gotB, err := b.Run(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, gotA, gotB)
	blB, err := b.Baseline(ctx, "v1")
	require.NoError(t, err)
	assert.Equal(t, bl, blB)
	pa, err := consoleReads(ctx, roDB(t, pathA), run.ID)
	require.NoError(t, err)
	pb, err := consoleReads(ctx, roDB(t, pathB), run.ID)
	require.NoError(t, err)
	assert.Equal(t, pa, pb)

	// Once each, in log order: again, or a run already held, inserts nothing.
	what, err = b.ApplyLog(ctx, 2, 2, ship(t, a, KindBaseline, bl.ID), t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedBefore, what)
	what, err = b.ApplyLog(ctx, 5, 6, ship(t, a, KindRun, run.ID), t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedPresent, what)
	what, err = a.ApplyLog(ctx, 1, 2, ship(t, a, KindRun, run.ID), t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedPresent, what, "the store's own run")
	assert.Equal(t, allRows(t, a)["scores"], allRows(t, b)["scores"])
	ls, err := b.LogState(ctx)
	require.NoError(t, err)
	assert.Equal(t, LogState{Known: true, Applied: 5, Last: 6, Missed: 2, CheckedAt: t0}, ls)
	assert.Equal(t, uint64(1), ls.Behind())
	seq, err := b.logSeq(ctx, run.ID)
	require.NoError(t, err)
	assert.Equal(t, uint64(1), seq, "a run keeps its first place in the log")
	pending, err = a.Pending(ctx)
	require.NoError(t, err)
	assert.Equal(t, [][2]string{{KindBaseline, bl.ID}}, pending, "the run read back from the log is no longer pending")
}

// TestLogDecidesWhichBaselineALabelNames: two baselines of one label
// made on two stores at once name, on every store, the one later in the
// log, whatever their clocks said; before its own is read back, a store
// names its own.
func TestLogDecidesWhichBaselineALabelNames(t *testing.T) {
	ctx := context.Background()
	a, _ := openTest(t)
	b, _ := openTest(t)
	c, _ := openTest(t)
	ra, rb := sampleRun("run-a", "", t0, 1, 1), sampleRun("run-b", "", t0, 0, 1)
	require.NoError(t, a.SaveRun(ctx, ra))
	require.NoError(t, b.SaveRun(ctx, rb))
	// b's clock is behind: its baseline is created "earlier" but logged later.
	bla, err := a.CreateBaseline(ctx, ra.ID, "prod", t0.Add(time.Hour))
	require.NoError(t, err)
	blb, err := b.CreateBaseline(ctx, rb.ID, "prod", t0.Add(time.Minute))
	require.NoError(t, err)
	got, err := a.Baseline(ctx, "prod")
	require.NoError(t, err)
	assert.Equal(t, bla.ID, got.ID, "a's own, not yet on the log")

	log := []LogRecord{ship(t, a, KindRun, ra.ID), ship(t, b, KindRun, rb.ID), ship(t, a, KindBaseline, bla.ID), ship(t, b, KindBaseline, blb.ID)}
	for _, st := range []*Store{a, b, c} {
		for i, rec := range log {
			_, err := st.ApplyLog(ctx, uint64(i+1), uint64(len(log)), rec, t0)
			require.NoError(t, err)
		}
		got, err := st.Baseline(ctx, "prod")
		require.NoError(t, err)
		assert.Equal(t, blb.ID, got.ID, "the later in the log")
		list, err := st.BaselineList(ctx)
		require.NoError(t, err)
		assert.Len(t, list, 2, "both are kept")
	}
}

// TestLogRecordsThatCannotApply: a record of another kind, not JSON,
// naming a column this schema lacks, or another table, is refused and the
// position stays; a baseline whose run the store lacks is skipped, counted
// as applied.
func TestLogRecordsThatCannotApply(t *testing.T) {
	ctx := context.Background()
	st, _ := openTest(t)
	for _, kind := range []string{"", "runs", "Run", "baseline.v2", "snapshot"} {
		_, err := DecodeLogRecord([]byte(`{"kind":"` + kind + `","id":"r","rows":{"eval_runs":[{"id":"r"}]}}`))
		assert.ErrorIs(t, err, ErrLogRecord)
		assert.ErrorContains(t, err, `kind "`+kind+`" (want run or baseline)`)
	}
	_, err := DecodeLogRecord([]byte("VXRB\x01"))
	assert.ErrorIs(t, err, ErrLogRecord)
	_, err = DecodeLogRecord([]byte(`{"kind":"run","id":"r","rows":{"eval_runs":[{"id":"r"}],"calls":[{}]}}`))
	assert.ErrorIs(t, err, ErrLogRecord)
	assert.ErrorContains(t, err, `table "calls"`)
	_, err = DecodeLogRecord([]byte(`{"kind":"run","id":"r","rows":{"eval_runs":[{"id":"other"}]}}`))
	assert.ErrorIs(t, err, ErrLogRecord)
	rec, err := DecodeLogRecord([]byte(`{"kind":"run","id":"r","rows":{"eval_runs":[{"id":"r","model":"m","started_at":"2026-01-01T00:00:00+00:00","from_the_future":1}]}}`))
	require.NoError(t, err)
	_, err = st.ApplyLog(ctx, 1, 1, rec, t0)
	assert.ErrorIs(t, err, ErrLogRecord)
	assert.ErrorContains(t, err, `"from_the_future"`)
	ls, err := st.LogState(ctx)
	require.NoError(t, err)
	assert.Zero(t, ls.Applied)

	rec, err = DecodeLogRecord([]byte(`{"kind":"baseline","id":"bl-x","rows":{"baselines":[{"id":"bl-x","eval_run_id":"run-nowhere","mean_score":0.5,"created_at":"2026-01-01T00:00:00+00:00","label":"v"}]}}`))
	require.NoError(t, err)
	what, err := st.ApplyLog(ctx, 1, 1, rec, t0)
	require.NoError(t, err)
	assert.Equal(t, AppliedOrphan, what)
	_, err = st.Baseline(ctx, "v")
	assert.ErrorIs(t, err, ErrNotFound)
}
