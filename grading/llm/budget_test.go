package llm

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// fixedModel answers every call with its usage, or fails with err.
type fixedModel struct {
	id      string
	in, out int64
	err     error
}

func (m fixedModel) ID() string { return m.id }

func (m fixedModel) Complete(context.Context, Call) (Completion, error) {
	return Completion{Text: "ok", InputTokens: m.in, OutputTokens: m.out}, m.err
}

// TestBudgetSumsMicroDollars: 25 calls of $0.0004 reach a $0.01 cap
// exactly, so the 26th is refused (summed in float64 the 25 fell short of
// 0.01 and one more call started).
func TestBudgetSumsMicroDollars(t *testing.T) {
	b, err := NewBudget(0.01, PriceBook{"openai:m": {InputPerMTok: 1}})
	require.NoError(t, err)
	m := b.Wrap(fixedModel{id: "openai:m", in: 400}) // 400 tokens at $1/Mtok: $0.0004
	for i := range 25 {
		_, err := m.Complete(t.Context(), Call{})
		require.NoError(t, err, "call %d", i+1)
	}
	require.Equal(t, 0.01, b.Spent())
	_, err = m.Complete(t.Context(), Call{})
	require.ErrorIs(t, err, ErrCostLimit)
	paid, refused := b.Counts()
	require.Equal(t, 25, paid)
	require.Equal(t, 1, refused)

	_, err = NewBudget(0.0000004, nil)
	require.Error(t, err, "a cap under a micro-dollar cannot be held")
}

// TestBudgetPaidCallsSucceededAndPriced: paid_calls counts the calls that
// succeeded and were priced, a model priced at $0 included; a failed call
// is not one (its reported usage is still charged).
func TestBudgetPaidCallsSucceededAndPriced(t *testing.T) {
	b, err := NewBudget(1, PriceBook{"openai:m": {InputPerMTok: 1}, "openai:free": {}})
	require.NoError(t, err)
	failing := errors.New("upstream 500")
	for _, c := range []fixedModel{
		{id: "openai:m", in: 100},
		{id: "openai:m", in: 50, err: failing},
		{id: "openai:free", in: 1000},
		{id: "openai:free", err: failing},
	} {
		_, _ = b.Wrap(c).Complete(t.Context(), Call{})
	}
	paid, refused := b.Counts()
	require.Equal(t, 2, paid, "one paid call and one priced at $0 succeeded")
	require.Zero(t, refused)
	require.Equal(t, 0.00015, b.Spent(), "the failed call's usage is charged")
}

// gateModel answers each call only once release is closed, saying on
// entered that a call is in flight.
type gateModel struct {
	fixedModel
	entered chan struct{}
	release chan struct{}
}

func (m gateModel) Complete(ctx context.Context, c Call) (Completion, error) {
	m.entered <- struct{}{}
	<-m.release
	return m.fixedModel.Complete(ctx, c)
}

// TestBudgetCountsCallsInFlight: once a call of a model has been priced,
// calls started at once are admitted only while the spend plus the
// estimated cost of those in flight is under the cap: with $0.01 spent of
// $0.05, four of eight concurrent $0.01 calls start, and the spend ends at
// the cap, not past it.
func TestBudgetCountsCallsInFlight(t *testing.T) {
	b, err := NewBudget(0.05, PriceBook{"openai:m": {InputPerMTok: 100}})
	require.NoError(t, err)
	fm := fixedModel{id: "openai:m", in: 100} // $0.01
	_, err = b.Wrap(fm).Complete(t.Context(), Call{})
	require.NoError(t, err)
	g := gateModel{fixedModel: fm, entered: make(chan struct{}), release: make(chan struct{})}
	m := b.Wrap(g)
	const n = 8
	results := make(chan error, n)
	for range n {
		go func() {
			_, err := m.Complete(t.Context(), Call{})
			results <- err
		}()
	}
	entered, refused := 0, 0
	for entered+refused < n {
		select {
		case <-g.entered:
			entered++
		case err := <-results:
			require.ErrorIs(t, err, ErrCostLimit)
			refused++
		}
	}
	close(g.release)
	for range entered {
		require.NoError(t, <-results)
	}
	require.Equal(t, 4, entered, "the calls that fit under the cap with those in flight")
	require.Equal(t, 0.05, b.Spent())
}

// memLedger records what a budget reserves and settles; reserveErr fails
// every Reserve.
type memLedger struct {
	mu         sync.Mutex
	reserved   []LedgerCall
	settled    []LedgerCall
	reserveErr error
}

func (l *memLedger) Reserve(_ context.Context, c LedgerCall) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reserveErr != nil {
		return l.reserveErr
	}
	l.reserved = append(l.reserved, c)
	return nil
}

func (l *memLedger) Settle(_ context.Context, c LedgerCall) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.settled = append(l.settled, c)
	return nil
}

// TestBudgetLedger: a resumed budget counts the earlier attempts' spend
// and calls against its cap, reserves every paid call in the ledger before
// making it (at the estimate: the largest priced call of the model) with
// its case, and settles it at its price; once a reservation fails, the
// call is not made, Err says so, and no paid call starts after it.
func TestBudgetLedger(t *testing.T) {
	b, err := NewBudget(0.05, PriceBook{"openai:m": {InputPerMTok: 100}})
	require.NoError(t, err)
	l := &memLedger{}
	b.Resume(Spend{Micro: 30000, Calls: 3, Est: map[string]int64{"openai:m": 10000}}, l)
	var made atomic.Int32
	m := b.Wrap(countingModel{fixedModel: fixedModel{id: "openai:m", in: 100}, n: &made})
	ctx := WithCase(t.Context(), "c7")
	for range 2 {
		_, err := m.Complete(ctx, Call{})
		require.NoError(t, err)
	}
	_, err = m.Complete(ctx, Call{})
	require.ErrorIs(t, err, ErrCostLimit, "$0.03 before and $0.02 now reach the cap")
	paid, _ := b.Counts()
	require.Equal(t, 5, paid)
	require.Equal(t, 0.05, b.Spent())
	require.Equal(t, []LedgerCall{{Seq: 1, Case: "c7", Model: "openai:m", Micro: 10000}, {Seq: 2, Case: "c7", Model: "openai:m", Micro: 10000}}, l.reserved)
	require.Equal(t, []LedgerCall{{Seq: 1, Case: "c7", Model: "openai:m", Micro: 10000, Paid: true}, {Seq: 2, Case: "c7", Model: "openai:m", Micro: 10000, Paid: true}}, l.settled)

	meter := NewMeter(PriceBook{"openai:m": {InputPerMTok: 100}})
	meter.Resume(Spend{}, &memLedger{reserveErr: errors.New("nats: no responders available for request")})
	made.Store(0)
	mm := meter.Wrap(countingModel{fixedModel: fixedModel{id: "openai:m", in: 100}, n: &made})
	_, err = mm.Complete(ctx, Call{})
	require.ErrorIs(t, err, ErrLedger)
	require.ErrorIs(t, meter.Err(), ErrLedger)
	_, err = mm.Complete(ctx, Call{})
	require.ErrorIs(t, err, ErrLedger)
	require.Zero(t, made.Load(), "no call is made unrecorded")
}

// countingModel counts the calls it answers.
type countingModel struct {
	fixedModel
	n *atomic.Int32
}

func (m countingModel) Complete(ctx context.Context, c Call) (Completion, error) {
	m.n.Add(1)
	return m.fixedModel.Complete(ctx, c)
}
