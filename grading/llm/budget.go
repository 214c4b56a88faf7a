package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
)

// ErrCostLimit marks a paid call that was not made because the run's
// priced spend had reached its cap. The case it belonged to is unmeasured
// with reason ReasonCostLimit.
var ErrCostLimit = errors.New("cost_limit")

// ReasonCostLimit is the unmeasured reason of a case whose paid call was
// not made because the cap was reached.
const ReasonCostLimit = "cost_limit"

// Budget caps the priced spend of the calls made through the models it
// wraps (the model under evaluation, the judge, the semantic judge). It is
// safe for concurrent use.
//
// The bound: a paid call starts only while the spend is below the limit,
// and is charged when it returns. Calls already in flight when a charge
// brings the spend to the limit finish and are charged, and no call starts
// after it, so the final spend is at most the limit plus the cost of the
// calls in flight at that moment: with n cases graded at once, each making
// one call at a time, at most n-1 of them. A call priced at 0 (the stub, a
// model priced 0) is never refused. Spend is summed in whole micro-dollars
// (each call's cost rounded to the nearest), so the comparison with the
// limit is exact: 25 calls of $0.0004 reach a $0.01 cap, as they do on
// paper.
type Budget struct {
	limit  int64 // micro-USD
	prices PriceBook

	mu      sync.Mutex
	spent   int64 // micro-USD
	calls   int
	refused int
}

// NewBudget returns a budget of limitUSD (at least $0.000001, finite)
// priced with prices (nil means DefaultPriceBook).
func NewBudget(limitUSD float64, prices PriceBook) (*Budget, error) {
	if !(limitUSD >= 1e-6) || math.IsInf(limitUSD, 0) || limitUSD > math.MaxInt64/1e6 {
		return nil, fmt.Errorf("cost limit %v: want a finite amount of US dollars of at least 0.000001", limitUSD)
	}
	if prices == nil {
		prices = DefaultPriceBook()
	}
	return &Budget{limit: int64(math.Round(limitUSD * 1e6)), prices: prices}, nil
}

// Limit returns the cap in US dollars.
func (b *Budget) Limit() float64 { return float64(b.limit) / 1e6 }

// Spent returns the priced spend so far, in US dollars.
func (b *Budget) Spent() float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return float64(b.spent) / 1e6
}

// Counts returns the paid calls made (calls that succeeded and were
// priced, at any price, 0 included) and the calls refused at the cap.
func (b *Budget) Counts() (paid, refused int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls, b.refused
}

// Reached reports whether the spend has reached the limit.
func (b *Budget) Reached() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.spent >= b.limit
}

// paid reports whether a call of model costs anything: priced above 0, or
// not priced at all (an unpriced model cannot be bounded; Prepare refuses
// a capped run with one).
func (b *Budget) paid(model string) bool {
	p, ok := b.prices.Lookup(model)
	return !ok || p.InputPerMTok > 0 || p.OutputPerMTok > 0
}

// start admits one paid call, or refuses it with ErrCostLimit.
func (b *Budget) start() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.spent >= b.limit {
		b.refused++
		return fmt.Errorf("%w: spent $%.6f of the $%.6f cap", ErrCostLimit, float64(b.spent)/1e6, float64(b.limit)/1e6)
	}
	return nil
}

// charge adds the priced usage of a finished call of model (an answer that
// failed after the provider reported usage is charged too) and counts it
// as paid when it succeeded and is priced.
func (b *Budget) charge(model string, comp Completion, err error) {
	p, priced := b.prices.Lookup(model)
	micro := int64(0)
	if priced {
		// Price per million tokens times tokens is micro-dollars.
		micro = int64(math.Round(float64(comp.InputTokens)*p.InputPerMTok + float64(comp.OutputTokens)*p.OutputPerMTok))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent += micro
	if err == nil && priced {
		b.calls++
	}
}

// Wrap returns m with every paid call admitted and charged by the budget.
// The wrapped model has m's id; a nil budget returns m.
func (b *Budget) Wrap(m Model) Model {
	if b == nil || m == nil {
		return m
	}
	return &budgeted{m: m, b: b}
}

type budgeted struct {
	m Model
	b *Budget
}

func (c *budgeted) ID() string { return c.m.ID() }

// Complete refuses the call with ErrCostLimit once the budget is spent,
// else makes it and charges its priced usage (an answer that failed after
// the provider reported usage is charged too).
func (c *budgeted) Complete(ctx context.Context, req Call) (Completion, error) {
	if c.b.paid(c.m.ID()) {
		if err := c.b.start(); err != nil {
			return Completion{}, err
		}
	}
	comp, err := c.m.Complete(ctx, req)
	c.b.charge(c.m.ID(), comp, err)
	return comp, err
}
