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

// ErrLedger marks a paid call that was not made because it could not be
// recorded (Ledger.Reserve failed), or that was made and whose cost could
// not be recorded (Ledger.Settle failed): the run must not go on spending
// unrecorded, and fails with it (Budget.Err).
var ErrLedger = errors.New("spend not recorded")

// LedgerCall is one paid call as a Ledger records it.
type LedgerCall struct {
	// Seq numbers the budget's calls from 1; with the ledger's own
	// attempt it names the call.
	Seq int
	// Case is the case the call was made for (CaseFrom); "" when none.
	Case  string
	Model string
	// Micro is the call's reserved cost before it is made (Reserve: the
	// budget's estimate) and its priced cost once it returned (Settle), in
	// micro-dollars.
	Micro int64
	// Paid (Settle) reports that the call succeeded and was priced.
	Paid bool
}

// Ledger records a budget's paid calls durably as they are made, so that
// an attempt resumed after a crash knows what its earlier attempts paid
// (Spend). It must be safe for concurrent use.
type Ledger interface {
	// Reserve records a paid call before it is made, with its estimated
	// cost; it returns once the record is durable. An error refuses the
	// call (ErrLedger).
	Reserve(ctx context.Context, c LedgerCall) error
	// Settle records the call's priced cost once it returned.
	Settle(ctx context.Context, c LedgerCall) error
}

// Spend is what earlier attempts of a run paid, as their Ledger recorded
// it: calls settled at their priced cost, and calls reserved and never
// settled (made, or about to be, when the attempt died: the endpoint may
// have been paid) at their reservation.
type Spend struct {
	Micro int64
	// Calls counts the settled calls that were paid and the unsettled
	// ones.
	Calls int
	// Est is the largest priced cost of a call of each model, the
	// estimate the next call of the model is reserved at.
	Est map[string]int64
}

type caseKey struct{}

// WithCase marks the calls made under ctx as made for case id (the
// Ledger records it).
func WithCase(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, caseKey{}, id)
}

// CaseFrom returns the case WithCase marked ctx with, or "".
func CaseFrom(ctx context.Context) string {
	id, _ := ctx.Value(caseKey{}).(string)
	return id
}

// Budget caps the priced spend of the calls made through the models it
// wraps (the model under evaluation, the judge, the semantic judge). It is
// safe for concurrent use.
//
// The bound: a paid call starts only while the spend plus the estimated
// cost of the calls in flight is below the limit, and is charged when it
// returns. A call's estimate is the largest priced cost of a call of its
// model so far (0 until one has returned), so calls of an even cost never
// pass the limit by more than the one call that crosses it, however many
// run at once; until a model's first call has returned, as many calls as
// are graded at once may start. A call priced at 0 (the stub, a model
// priced 0) is never refused. Spend is summed in whole micro-dollars (each
// call's cost rounded to the nearest), so the comparison with the limit is
// exact: 25 calls of $0.0004 reach a $0.01 cap, as they do on paper.
//
// With a Ledger (Resume), every paid call is reserved in it before it is
// made and settled after, and the spend and calls of earlier attempts
// count against the limit.
type Budget struct {
	limit  int64 // micro-USD
	prices PriceBook

	mu       sync.Mutex
	spent    int64 // micro-USD
	reserved int64 // estimates of the calls in flight, micro-USD
	est      map[string]int64
	calls    int
	refused  int
	seq      int
	ledger   Ledger
	err      error // the first ledger failure
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
	return &Budget{limit: int64(math.Round(limitUSD * 1e6)), prices: prices, est: map[string]int64{}}, nil
}

// NewMeter returns a budget without a limit: it refuses no call, and
// records the paid calls in its Ledger (Resume) all the same.
func NewMeter(prices PriceBook) *Budget {
	if prices == nil {
		prices = DefaultPriceBook()
	}
	return &Budget{limit: math.MaxInt64, prices: prices, est: map[string]int64{}}
}

// Resume counts the spend of earlier attempts (recorded in l) against the
// limit and records every paid call from now on in l. Call it before any
// call is made.
func (b *Budget) Resume(prior Spend, l Ledger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.spent += prior.Micro
	b.calls += prior.Calls
	for m, c := range prior.Est {
		b.est[m] = max(b.est[m], c)
	}
	b.ledger = l
}

// Err returns the first failure to record a paid call in the ledger
// (wrapping ErrLedger), or nil. Once it is set no paid call starts.
func (b *Budget) Err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
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
// priced, at any price, 0 included, and calls of earlier attempts whose
// outcome was lost with them) and the calls refused at the cap.
func (b *Budget) Counts() (paid, refused int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls, b.refused
}

// paid reports whether a call of model costs anything: priced above 0, or
// not priced at all (an unpriced model cannot be bounded; Prepare refuses
// a capped run with one).
func (b *Budget) paid(model string) bool {
	p, ok := b.prices.Lookup(model)
	return !ok || p.InputPerMTok > 0 || p.OutputPerMTok > 0
}

// start admits one paid call and reserves it (in the ledger too, when
// there is one), or refuses it with ErrCostLimit or ErrLedger.
func (b *Budget) start(ctx context.Context, model string, req Call) (c LedgerCall, held int64, err error) {
	b.mu.Lock()
	if b.err != nil {
		b.mu.Unlock()
		return LedgerCall{}, 0, b.err
	}
	if b.spent+b.reserved >= b.limit {
		b.refused++
		err := fmt.Errorf("%w: spent $%.6f of the $%.6f cap", ErrCostLimit, float64(b.spent)/1e6, float64(b.limit)/1e6)
		b.mu.Unlock()
		return LedgerCall{}, 0, err
	}
	b.seq++
	c = LedgerCall{Seq: b.seq, Case: CaseFrom(ctx), Model: model, Micro: b.estimate(model, req)}
	held = b.est[model] // 0 until a call of model has returned
	b.reserved += held
	l := b.ledger
	b.mu.Unlock()
	if l == nil {
		return c, held, nil
	}
	if err := l.Reserve(ctx, c); err != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.reserved -= held
		return LedgerCall{}, 0, b.fail(fmt.Errorf("reserve call %d of %s: %w", c.Seq, model, err))
	}
	return c, held, nil
}

// estimate is what a call of model is reserved at in the ledger: the
// largest priced cost of a call of it so far, else (no call of it has
// returned) its prompt's bytes as input tokens and its answer's token
// cap (DefaultMaxTokens when unset) as output tokens. b.mu is held.
func (b *Budget) estimate(model string, req Call) int64 {
	if e, ok := b.est[model]; ok {
		return e
	}
	p, ok := b.prices.Lookup(model)
	if !ok {
		return 0
	}
	in := len(req.System) + len(req.Prompt)
	for _, t := range req.Tools {
		in += len(t)
	}
	if j := req.Judge; j != nil {
		in += len(j.Rubric) + len(j.Output)
	}
	out := req.MaxTokens
	if out <= 0 {
		out = DefaultMaxTokens
	}
	return int64(math.Round(float64(in)*p.InputPerMTok + float64(out)*p.OutputPerMTok))
}

// fail records the first ledger failure and returns it. b.mu is held.
func (b *Budget) fail(err error) error {
	if b.err == nil {
		b.err = fmt.Errorf("%w: %w", ErrLedger, err)
	}
	return b.err
}

// charge adds the priced usage of a finished call of model (an answer that
// failed after the provider reported usage is charged too), counts it as
// paid when it succeeded and is priced, and releases held and settles c
// in the ledger (started: the call was admitted by start).
func (b *Budget) charge(ctx context.Context, model string, c LedgerCall, held int64, started bool, comp Completion, err error) {
	p, priced := b.prices.Lookup(model)
	micro := int64(0)
	if priced {
		// Price per million tokens times tokens is micro-dollars.
		micro = int64(math.Round(float64(comp.InputTokens)*p.InputPerMTok + float64(comp.OutputTokens)*p.OutputPerMTok))
	}
	b.mu.Lock()
	b.reserved -= held
	b.spent += micro
	if err == nil && priced {
		b.calls++
	}
	if priced && (comp.InputTokens > 0 || comp.OutputTokens > 0) {
		b.est[model] = max(b.est[model], micro)
	}
	l := b.ledger
	b.mu.Unlock()
	if l == nil || !started {
		return
	}
	c.Micro, c.Paid = micro, err == nil && priced
	if lerr := l.Settle(ctx, c); lerr != nil {
		b.mu.Lock()
		b.fail(fmt.Errorf("settle call %d of %s: %w", c.Seq, model, lerr))
		b.mu.Unlock()
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

// Complete refuses the call with ErrCostLimit once the budget is spent
// (or with ErrLedger once its ledger failed), else reserves it, makes it
// and charges its priced usage (an answer that failed after the provider
// reported usage is charged too).
func (c *budgeted) Complete(ctx context.Context, req Call) (Completion, error) {
	var call LedgerCall
	var held int64
	started := c.b.paid(c.m.ID())
	if started {
		var err error
		if call, held, err = c.b.start(ctx, c.m.ID(), req); err != nil {
			return Completion{}, err
		}
	}
	comp, err := c.m.Complete(ctx, req)
	c.b.charge(ctx, c.m.ID(), call, held, started, comp, err)
	return comp, err
}
