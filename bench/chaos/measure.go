package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/bench/proc"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// measure runs every check once serve has stopped: the store against the
// directory, the eval requests, and every chain.
func (r *runner) measure(ctx context.Context) error {
	if err := r.checkTraces(ctx); err != nil {
		return err
	}
	if err := r.checkEvals(ctx); err != nil {
		return err
	}
	r.addChain(fileChain(filepath.Join(r.data, "events.ndjson")))
	return r.checkSubjects(ctx)
}

// checkTraces compares the fleet aggregate's calls with the directory's, call by
// call (lost, duplicated) and as cost-per-outcome reports field by field
// (the directory's from a `verdryx cost-per-correct --json` child).
func (r *runner) checkTraces(ctx context.Context) error {
	direct, n, err := directRunCalls(r.traces)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	r.res.DirectCalls = n
	agg := r.agg
	if r.aggErr != nil {
		return fmt.Errorf("chaos: read the trace partitions: %w", r.aggErr)
	}
	red, err := agg.Reducer(outcome.Options{})
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	r.res.StoreCalls = agg.Calls()
	stored, err := agg.Runs()
	if err != nil {
		return fmt.Errorf("chaos: read the trace partitions: %w", err)
	}
	for run, want := range direct {
		if got := stored[run]; got < want {
			r.res.Lost += int64(want - got)
		}
	}
	for run, got := range stored {
		if want := direct[run]; got > want {
			r.res.Duplicated += int64(got - want)
		}
	}

	var out bytes.Buffer
	c, err := r.spawnTo(&out, "cost-per-correct", "cost-per-correct", "--traces", r.traces, "--json")
	if err != nil {
		return err
	}
	if !c.Wait(5 * time.Minute) {
		c.Kill()
		return fmt.Errorf("chaos: cost-per-correct did not finish in 5 minutes; log %s", c.Log)
	}
	if c.ExitCode() != 0 {
		return fmt.Errorf("chaos: cost-per-correct: %s; log %s", c.Describe(), c.Log)
	}
	var want outcome.Report
	if err := json.Unmarshal(out.Bytes(), &want); err != nil {
		return fmt.Errorf("chaos: cost-per-correct --json output: %w", err)
	}
	got := red.Report()
	r.res.DirectRuns, r.res.StoreRuns = overall(&want).Runs, overall(got).Runs
	r.res.ReportDiffs = append(r.res.ReportDiffs, compareReports(&want, got)...)
	if r.res.Lost > 0 {
		r.res.problemf("%d of %d calls of the directory are not in the store", r.res.Lost, r.res.DirectCalls)
	}
	if r.res.Duplicated > 0 {
		r.res.problemf("the store holds %d calls more often than the directory does", r.res.Duplicated)
	}
	if len(r.res.ReportDiffs) > 0 {
		r.res.problemf("the store's cost-per-outcome report differs from cost-per-correct's in %d fields", len(r.res.ReportDiffs))
	}
	return nil
}

// spawnTo runs a child whose stdout is captured into out (stderr goes to
// its log file).
func (r *runner) spawnTo(out *bytes.Buffer, name string, args ...string) (*proc.Child, error) {
	c, err := proc.SpawnCapture(r.opts.Bin, r.logs, name, out, args...)
	if err != nil {
		return nil, err
	}
	r.children = append(r.children, c)
	return c, nil
}

func overall(rep *outcome.Report) outcome.OutcomeRow {
	if len(rep.Groups) == 0 {
		return outcome.OutcomeRow{}
	}
	return rep.Groups[0].Overall
}

// compareReports lists every per-outcome field (runs, calls, blocked
// calls, cost) and overall figure that differs, as "field: direct X, store
// Y".
func compareReports(direct, stored *outcome.Report) []string {
	var diffs []string
	rows := func(rep *outcome.Report) map[string]outcome.OutcomeRow {
		m := map[string]outcome.OutcomeRow{}
		for _, g := range rep.Groups {
			for _, o := range g.Outcomes {
				m[o.Outcome] = o
			}
			m["overall"] = g.Overall
		}
		return m
	}
	d, s := rows(direct), rows(stored)
	var keys []string
	for k := range d {
		keys = append(keys, k)
	}
	for k := range s {
		if _, ok := d[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		a, b := d[k], s[k]
		for _, f := range []struct {
			name string
			x, y int64
		}{
			{"runs", a.Runs, b.Runs},
			{"calls", a.Calls, b.Calls},
			{"blocked_calls", a.BlockedCalls, b.BlockedCalls},
			{"total_cost_microusd", a.TotalCostMicroUSD, b.TotalCostMicroUSD},
		} {
			if f.x != f.y {
				diffs = append(diffs, fmt.Sprintf("%s %s: direct %d, store %d", k, f.name, f.x, f.y))
			}
		}
	}
	var dr, sr int64
	if len(direct.Groups) > 0 {
		dr = direct.Groups[0].ResolvedRuns
	}
	if len(stored.Groups) > 0 {
		sr = stored.Groups[0].ResolvedRuns
	}
	if dr != sr {
		diffs = append(diffs, fmt.Sprintf("resolved_runs: direct %d, store %d", dr, sr))
	}
	return diffs
}

// checkEvals counts the stored runs of each submitted request id, and
// which requests the store records as answered.
func (r *runner) checkEvals(ctx context.Context) error {
	st, err := store.Open(ctx, filepath.Join(r.data, "verdryx.db"), store.Options{})
	if err != nil {
		return fmt.Errorf("chaos: open the worker's store: %w", err)
	}
	defer st.Close()
	runs, err := st.RunsByRequest(ctx)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	for _, id := range r.requestIDs {
		n := runs[id]
		r.res.EvalRunsByRequest[id] = n
		r.res.EvalRuns += n
		_, recorded, err := st.RequestResult(ctx, id)
		if err != nil {
			return fmt.Errorf("chaos: %w", err)
		}
		if n > 0 && !recorded {
			r.res.EvalNotRecorded = append(r.res.EvalNotRecorded, id)
		}
		if n != 1 {
			r.res.problemf("eval request %s ran %d times (want exactly once)", id, n)
		}
	}
	if len(r.res.EvalNotRecorded) > 0 {
		r.res.problemf("%d eval requests have a stored run but no recorded result (a redelivery runs them again): %s",
			len(r.res.EvalNotRecorded), strings.Join(r.res.EvalNotRecorded, ", "))
	}
	return nil
}

// fileChain verifies the events file as `verdryx verify` does.
func fileChain(path string) Chain {
	ch := Chain{Kind: "file", Name: path}
	raw, err := os.ReadFile(path)
	if err != nil {
		ch.Error = err.Error()
		return ch
	}
	rep, err := envelope.Verify(bytes.NewReader(raw))
	if err != nil {
		ch.Error = err.Error()
		return ch
	}
	ch = fillChain(ch, rep)
	ch.DuplicateEvents = duplicateEvents(raw)
	return ch
}

// duplicateEvents counts the events of an NDJSON chain whose content (the
// event without its prev_hash) appeared earlier in it: the same event
// emitted twice.
func duplicateEvents(doc []byte) int {
	seen := map[string]bool{}
	dups := 0
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		hash, _, err := envelope.LineHash(line)
		if err != nil {
			continue
		}
		if seen[hash] {
			dups++
		}
		seen[hash] = true
	}
	return dups
}

func fillChain(ch Chain, rep envelope.Report) Chain {
	ch.Events, ch.Chained, ch.Heads, ch.Unverifiable = rep.Events, rep.Chained, rep.Heads, rep.Unverifiable
	ch.Breaks, ch.Malformed, ch.Invalid = len(rep.Breaks), len(rep.Malformed), len(rep.Invalid)
	ch.OK = rep.OK()
	return ch
}

func (r *runner) addChain(ch Chain) {
	r.res.Chains = append(r.res.Chains, ch)
	if ch.DuplicateEvents > 0 {
		ch.OK = false
		r.res.Chains[len(r.res.Chains)-1].OK = false
		r.res.problemf("chain %s %s holds %d events emitted twice", ch.Kind, ch.Name, ch.DuplicateEvents)
		return
	}
	switch {
	case ch.OK:
		r.res.ChainsVerified++
	case ch.Error != "":
		r.res.problemf("chain %s %s: %s", ch.Kind, ch.Name, ch.Error)
	default:
		r.res.problemf("chain %s %s does not verify: %d breaks, %d malformed, %d invalid of %d events",
			ch.Kind, ch.Name, ch.Breaks, ch.Malformed, ch.Invalid, ch.Events)
	}
}

// checkSubjects starts an embedded NATS server on the data directory's
// store (serve has stopped), or connects to the cluster, reads every message of every events subject
// in stream order and verifies each subject's prev_hash chain, and counts
// the dead letters.
func (r *runner) checkSubjects(ctx context.Context) error {
	url := r.url // the cluster, still up
	if r.cluster == nil {
		ns, err := embedded.Start(filepath.Join(r.data, "nats"), "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("chaos: reopen the NATS store: %w", err)
		}
		defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
		url = ns.ClientURL()
	}
	nc, err := nats.Connect(url, nats.Name("verdryx-bench-chaos-verify"))
	if err != nil {
		return fmt.Errorf("chaos: connect to the reopened NATS store: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	subj := streams.DefaultSubjects()
	if dl, err := js.Stream(ctx, subj.DeadLetterStream); err == nil {
		if info, err := dl.Info(ctx); err == nil {
			r.res.DeadLetters = info.State.Msgs
		}
	}
	if r.res.DeadLetters > 0 {
		r.res.problemf("note: %d messages were dead-lettered (stream %s)", r.res.DeadLetters, subj.DeadLetterStream)
	}
	stream, err := js.Stream(ctx, subj.EventsStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		r.res.problemf("no events stream %s", subj.EventsStream)
		return nil
	}
	if err != nil {
		return fmt.Errorf("chaos: events stream: %w", err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subj.Events+".>"))
	if err != nil {
		return fmt.Errorf("chaos: events stream info: %w", err)
	}
	var names []string
	for s := range info.State.Subjects {
		names = append(names, s)
	}
	slices.Sort(names)
	if len(names) == 0 && r.res.EvalRuns > 0 {
		r.res.problemf("no events subject under %s.> although %d eval runs were stored", subj.Events, r.res.EvalRuns)
	}
	for _, name := range names {
		r.addChain(r.subjectChain(ctx, js, subj.EventsStream, name, info.State.Subjects[name]))
	}
	return nil
}

// subjectChain reads the count messages of subject in order with an
// ordered consumer and verifies them as one NDJSON chain. On a cluster a
// node may just have come back and the stream's leader not be elected
// yet (no responders): the read starts over from the first message, until
// the deadline.
func (r *runner) subjectChain(ctx context.Context, js jetstream.JetStream, stream, subject string, count uint64) Chain {
	ch := Chain{Kind: "subject", Name: subject}
	deadline := time.Now().Add(2 * time.Minute)
	var doc []byte
	for {
		var err error
		doc, err = readSubject(ctx, js, stream, subject, count, deadline)
		if err == nil {
			break
		}
		if !errors.Is(err, nats.ErrNoResponders) || time.Now().After(deadline) {
			ch.Error = err.Error()
			return ch
		}
		select {
		case <-ctx.Done():
			ch.Error = ctx.Err().Error()
			return ch
		case <-time.After(250 * time.Millisecond):
		}
	}
	rep, err := envelope.Verify(bytes.NewReader(doc))
	if err != nil {
		ch.Error = err.Error()
		return ch
	}
	ch = fillChain(ch, rep)
	ch.DuplicateEvents = duplicateEvents(doc)
	return ch
}

// readSubject reads the count messages of subject in order, one NDJSON
// line each, with an ordered consumer, until deadline.
func readSubject(ctx context.Context, js jetstream.JetStream, stream, subject string, count uint64, deadline time.Time) ([]byte, error) {
	cons, err := js.OrderedConsumer(ctx, stream, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer: %w", err)
	}
	var buf bytes.Buffer
	got := uint64(0)
	for got < count && time.Now().Before(deadline) {
		batch, err := cons.Fetch(512, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch: %w", err)
		}
		for m := range batch.Messages() {
			buf.Write(bytes.TrimRight(m.Data(), "\n"))
			buf.WriteByte('\n')
			got++
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			return nil, fmt.Errorf("fetch: %w", err)
		}
	}
	if got < count {
		return nil, fmt.Errorf("read %d of %d messages in 2 minutes", got, count)
	}
	return buf.Bytes(), nil
}

// verdict sets OK from the findings.
func (r *runner) verdict() {
	res := r.res
	ok := res.Lost == 0 && res.Duplicated == 0 && len(res.ReportDiffs) == 0 && res.UnplannedExits == 0
	for _, id := range r.requestIDs {
		if res.EvalRunsByRequest[id] != 1 {
			ok = false
		}
	}
	if len(res.EvalNotRecorded) > 0 || len(res.Chains) == 0 || res.ChainsVerified != len(res.Chains) {
		ok = false
	}
	res.OK = ok
}
