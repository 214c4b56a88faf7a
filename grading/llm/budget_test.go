package llm

import (
	"context"
	"errors"
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
	require.True(t, b.Reached())
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
