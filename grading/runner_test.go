package grading

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading/grader"
	"github.com/verdryx/verdryx/grading/llm"
)

func mustSet(t *testing.T, js string) *EvalSet {
	t.Helper()
	set, err := ParseEvalSet([]byte(js), "")
	require.NoError(t, err)
	return set
}

// gateModel holds every call until release is closed, recording the most
// calls in flight at once.
type gateModel struct {
	release  chan struct{}
	inFlight atomic.Int32
	peak     atomic.Int32
	started  atomic.Int32
}

func (m *gateModel) ID() string { return "gate" }
func (m *gateModel) Complete(ctx context.Context, c llm.Call) (llm.Completion, error) {
	n := m.inFlight.Add(1)
	defer m.inFlight.Add(-1)
	for {
		p := m.peak.Load()
		if n <= p || m.peak.CompareAndSwap(p, n) {
			break
		}
	}
	m.started.Add(1)
	select {
	case <-m.release:
	case <-ctx.Done():
		return llm.Completion{}, ctx.Err()
	}
	return llm.Completion{Text: c.Prompt}, nil
}

func TestRunnerBoundsConcurrency(t *testing.T) {
	var cases []string
	for i := range 10 {
		cases = append(cases, fmt.Sprintf(`{"id":"c%d","prompt":"p%d","expected":"p%d"}`, i, i, i))
	}
	set := mustSet(t, `{"id":"s","cases":[`+strings.Join(cases, ",")+`]}`)
	m := &gateModel{release: make(chan struct{})}
	r := &Runner{Model: m, Concurrency: 3}
	done := make(chan Run)
	go func() {
		run, err := r.RunWithID(context.Background(), set, "", "")
		assert.NoError(t, err)
		done <- run
	}()
	deadline := time.Now().Add(5 * time.Second)
	for m.started.Load() < 3 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling a condition, with a deadline
	}
	require.EqualValues(t, 3, m.started.Load(), "three calls start")
	assert.EqualValues(t, 3, m.inFlight.Load(), "and no fourth while they are held")
	close(m.release)
	run := <-done
	assert.LessOrEqual(t, m.peak.Load(), int32(3))
	mean, ok := run.Mean()
	require.True(t, ok)
	assert.Equal(t, 1.0, mean)
	for i, s := range run.Scores {
		assert.Equal(t, fmt.Sprintf("c%d", i), s.CaseID, "scores keep eval set order")
	}
}

// failingModel fails calls whose prompt starts with "fail".
type failingModel struct{}

func (failingModel) ID() string { return "flaky" }
func (failingModel) Complete(_ context.Context, c llm.Call) (llm.Completion, error) {
	if strings.HasPrefix(c.Prompt, "fail") {
		return llm.Completion{}, fmt.Errorf("%w: 503", llm.ErrStatus)
	}
	return llm.Completion{Text: c.Prompt, InputTokens: 3, OutputTokens: 2}, nil
}

func TestRunnerCountsUngradableApart(t *testing.T) {
	set := mustSet(t, `{"id":"s","cases":[
		{"id":"ok","prompt":"yes","expected":"yes"},
		{"id":"wrong","prompt":"no","expected":"yes"},
		{"id":"down","prompt":"fail please","expected":"x"},
		{"id":"judged","prompt":"draft","rubric":"r","grader":"llm_judge"},
		{"id":"tag","prompt":"escalated","grader":"outcome_tag"}]}`)
	judge := &grader.Judge{Model: &cannedModel{id: "claude-haiku-4-5", text: "no idea"}}
	run, err := (&Runner{Model: failingModel{}, Judge: judge}).RunWithID(context.Background(), set, "agent://a.example/b", "")
	require.NoError(t, err)
	byID := map[string]Score{}
	for _, s := range run.Scores {
		byID[s.CaseID] = s
	}
	assert.Contains(t, byID["down"].Unmeasured, "model flaky: grading: provider answered an error status: 503")
	assert.Contains(t, byID["judged"].Unmeasured, "judge answer is not a single number")
	assert.Positive(t, byID["judged"].CostUSD, "the unparseable judge call is still priced")
	assert.Len(t, run.Unmeasured(), 2)
	mean, ok := run.Mean()
	require.True(t, ok)
	assert.InDelta(t, (1+0+0.5)/3.0, mean, 1e-12, "mean over graded cases only, unmeasured are not zeros")
	sum := Summarize(run)
	assert.Equal(t, 3, sum.GradedN)
	assert.Equal(t, 2, sum.Unanswered)
	assert.Equal(t, "agent://a.example/b", run.AgentID)
	assert.Equal(t, "claude-haiku-4-5", run.Judge)
	assert.Equal(t, map[string]any{"scores": grader.DefaultOutcomeScores()}, run.Provenance.Graders[GraderOutcomeTag])
	assert.Equal(t, []string{"flaky"}, run.Provenance.Unpriced, "the model has no price; the judge has one")
}

func TestRunnerAllUnmeasuredHasNoMean(t *testing.T) {
	set := mustSet(t, `{"id":"s","cases":[{"id":"a","prompt":"fail 1","expected":"x"},{"id":"b","prompt":"fail 2","expected":"y"}]}`)
	run, err := (&Runner{Model: failingModel{}}).RunWithID(context.Background(), set, "", "")
	require.NoError(t, err)
	_, ok := run.Mean()
	assert.False(t, ok)
	assert.Nil(t, Summarize(run).MeanScore, "unmeasured, never 0")
	assert.Nil(t, EvalRunData(Summarize(run))["mean_score"])
}

func TestRunnerStopsOnCancel(t *testing.T) {
	set := mustSet(t, `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"p"},{"id":"b","prompt":"q","expected":"q"}]}`)
	m := &gateModel{release: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	var err error
	go func() { defer wg.Done(); _, err = (&Runner{Model: m, Concurrency: 1}).RunWithID(ctx, set, "", "") }()
	cancel()
	wg.Wait()
	assert.True(t, errors.Is(err, context.Canceled))
}

func TestRunnerRecordsJudgeOnlyWhenUsed(t *testing.T) {
	j := &grader.Judge{Model: &llm.Stub{}}
	plain := mustSet(t, `{"id":"s","cases":[{"id":"a","prompt":"p","expected":"p"}]}`)
	run, err := (&Runner{Model: &llm.Stub{}, Judge: j}).RunWithID(context.Background(), plain, "", "")
	require.NoError(t, err)
	assert.Empty(t, run.Judge)
	judged := mustSet(t, `{"id":"s","cases":[{"id":"a","prompt":"p","rubric":"r","grader":"llm_judge"}]}`)
	run, err = (&Runner{Model: &llm.Stub{}, Judge: j}).RunWithID(context.Background(), judged, "", "")
	require.NoError(t, err)
	assert.Equal(t, llm.StubID, run.Judge)
}
