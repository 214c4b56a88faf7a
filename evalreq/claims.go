package evalreq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"crypto/rand"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/grading/llm"
	"github.com/verdryx/verdryx/lease"
	"github.com/verdryx/verdryx/producer"
	"github.com/verdryx/verdryx/streams"
)

// ClaimBucket is the JetStream KV bucket recording, across workers, which
// instance owns each eval request and whether it is done.
const ClaimBucket = "verdryx-eval-requests"

// maxClaimResult bounds a result carried in a claim (larger ones are
// answered by run id only).
const maxClaimResult = 512 << 10

// Claim states.
const (
	claimRunning = "running"
	claimDone    = "done"
)

// Claim is one eval request's record in ClaimBucket.
type Claim struct {
	RequestID string          `json:"request_id"`
	Instance  string          `json:"instance"`
	RunID     string          `json:"run_id"`
	State     string          `json:"state"`
	Result    json.RawMessage `json:"result,omitempty"`
	rev       uint64
}

// Claims makes "one run per request_id" hold across workers that
// share the eval consumer but keep stores of their own: a request is
// claimed in a KV bucket before grading, by one instance, with one run id.
// Another worker that receives the same request id answers a done claim
// from the bucket, waits (transient failure, redelivered with backoff)
// while the owner is alive and grading, and takes the claim over, with
// its run id, only when the owner's instance lease has expired. It is safe
// for concurrent use.
type Claims struct {
	kv       jetstream.KeyValue
	leases   jetstream.KeyValue
	instance string
	retry    *producer.Retrier
}

// NewClaims opens (creating if needed, with replicas, updating an
// existing bucket with fewer) the claim bucket for this worker instance.
// It blocks for at most the KV round trips. Every claim and ledger read
// and write is retried by retry while the bucket has no leader (nil: tried
// once; a failure then fails the attempt, which is redelivered).
func NewClaims(ctx context.Context, js jetstream.JetStream, instance string, replicas int, retry *producer.Retrier) (*Claims, error) {
	kv, err := streams.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: ClaimBucket, History: 1, Replicas: max(replicas, 1),
		TTL: 30 * 24 * time.Hour, Description: "verdryx: which worker owns each eval request"})
	if err != nil {
		return nil, fmt.Errorf("eval request claims bucket %s: %w", ClaimBucket, err)
	}
	leases, err := streams.EnsureKV(ctx, js, lease.BucketConfig(15*time.Second, replicas))
	if err != nil {
		return nil, fmt.Errorf("instance lease bucket %s: %w", lease.Bucket, err)
	}
	return &Claims{kv: kv, leases: leases, instance: instance, retry: retry}, nil
}

// claimKey is a KV-safe key for any request id.
func claimKey(requestID string) string {
	sum := sha256.Sum256([]byte(requestID))
	return "r" + hex.EncodeToString(sum[:16])
}

// errClaimedElsewhere is returned while another live instance grades the
// request: retry later.
var errClaimedElsewhere = errors.New("worker: eval request is being graded by another instance")

// Claim claims requestID for this instance with runID, unless it is
// already claimed. It returns the claim in force: this instance's (new,
// or its own from before a restart, whose run id wins), a done claim of
// any instance, or a running claim taken over from an instance whose lease
// expired. A running claim of another live instance is errClaimedElsewhere.
func (c *Claims) Claim(ctx context.Context, requestID, runID string) (Claim, error) {
	key := claimKey(requestID)
	mine := Claim{RequestID: requestID, Instance: c.instance, RunID: runID, State: claimRunning}
	b, err := json.Marshal(mine)
	if err != nil {
		return Claim{}, err
	}
	// A create retried after its acknowledgement was lost finds the key
	// existing, with this instance's claim: it is taken below as ours.
	var rev uint64
	err = c.retry.Do(ctx, "claim eval request", func(ctx context.Context) (err error) {
		rev, err = c.kv.Create(ctx, key, b)
		return err
	})
	if err == nil {
		mine.rev = rev
		return mine, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return Claim{}, fmt.Errorf("claim eval request %s: %w", requestID, err)
	}
	cur, err := c.get(ctx, key)
	if err != nil {
		return Claim{}, fmt.Errorf("claim eval request %s: %w", requestID, err)
	}
	if cur.State == claimDone || cur.Instance == c.instance {
		return cur, nil
	}
	alive, err := c.alive(ctx, cur.Instance)
	if err != nil {
		return Claim{}, fmt.Errorf("claim eval request %s: %w", requestID, err)
	}
	if alive {
		return Claim{}, fmt.Errorf("%w: request %s, instance %s", errClaimedElsewhere, requestID, cur.Instance)
	}
	// The owner died before finishing: take over under its run id.
	taken := cur
	taken.Instance = c.instance
	if b, err = json.Marshal(taken); err != nil {
		return Claim{}, err
	}
	err = c.retry.Do(ctx, "take over eval request", func(ctx context.Context) (err error) {
		rev, err = c.kv.Update(ctx, key, b, cur.rev)
		return err
	})
	if err != nil {
		return Claim{}, fmt.Errorf("take over eval request %s from %s: %w", requestID, cur.Instance, err)
	}
	taken.rev = rev
	return taken, nil
}

// Done marks requestID done with its run and result (carried when small
// enough). It is idempotent.
func (c *Claims) Done(ctx context.Context, requestID, runID string, result []byte) error {
	done := Claim{RequestID: requestID, Instance: c.instance, RunID: runID, State: claimDone}
	if len(result) <= maxClaimResult {
		done.Result = result
	}
	b, err := json.Marshal(done)
	if err != nil {
		return err
	}
	if err := c.retry.Do(ctx, "mark eval request done", func(ctx context.Context) error {
		_, err := c.kv.Put(ctx, claimKey(requestID), b)
		return err
	}); err != nil {
		return fmt.Errorf("mark eval request %s done: %w", requestID, err)
	}
	return nil
}

func (c *Claims) get(ctx context.Context, key string) (Claim, error) {
	var e jetstream.KeyValueEntry
	err := c.retry.Read(ctx, "read eval request claim", func(ctx context.Context) (err error) {
		e, err = c.kv.Get(ctx, key)
		return err
	})
	if err != nil {
		return Claim{}, err
	}
	var cl Claim
	if err := json.Unmarshal(e.Value(), &cl); err != nil {
		return Claim{}, fmt.Errorf("claim %s unreadable: %w", key, err)
	}
	cl.rev = e.Revision()
	return cl, nil
}

// alive reports whether instance holds a live lease.
func (c *Claims) alive(ctx context.Context, instance string) (bool, error) {
	err := c.retry.Read(ctx, "read instance lease", func(ctx context.Context) error {
		_, err := c.leases.Get(ctx, instance)
		return err
	})
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		return false, nil
	}
	return false, err
}

// A request's spend ledger lives in ClaimBucket beside its claim, under
// keys below the claim's key:
//
//	<claim>.call.<attempt>.<seq>  one paid call: reserved before it is made, settled after
//	<claim>.case.<case hash>      one case that made paid calls, graded: its score (answer kept)
//
// <attempt> is random per grading attempt, so attempts never overwrite
// each other's calls.

// Call states in the ledger.
const (
	callReserved = "reserved"
	callSettled  = "settled"
)

// ledgerCall is a call's record.
type ledgerCall struct {
	Case  string `json:"case"`
	Model string `json:"model"`
	Micro int64  `json:"micro_usd"`
	State string `json:"state"`
	Paid  bool   `json:"paid,omitempty"`
}

// ledgerCase is a graded case's record.
type ledgerCase struct {
	Case string `json:"case"`
	evalrun.PriorCase
}

// Journal is one grading attempt's ledger of a request (evalrun.Journal):
// it records every paid call in ClaimBucket before it is made (Reserve)
// and once it returned (Settle), and every case that made one as it is
// graded (CaseDone). It is safe for concurrent use.
type Journal struct {
	kv      jetstream.KeyValue
	retry   *producer.Retrier
	prefix  string
	attempt string
	logger  *slog.Logger

	mu    sync.Mutex
	paid  map[string]bool // cases with a paid call in this attempt
	known []string        // every ledger key read or written
}

var _ evalrun.Journal = (*Journal)(nil)

// Journal reads what earlier attempts of requestID recorded in its ledger
// and returns the journal of a new attempt with it. It blocks for one KV
// watch of the request's keys.
func (c *Claims) Journal(ctx context.Context, requestID string, logger *slog.Logger) (*Journal, evalrun.Prior, error) {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	j := &Journal{kv: c.kv, retry: c.retry, prefix: claimKey(requestID), attempt: hex.EncodeToString(b[:]), logger: logger, paid: map[string]bool{}}
	var prior evalrun.Prior
	err := j.retry.Read(ctx, "read spend ledger", func(ctx context.Context) (err error) {
		prior, err = j.load(ctx)
		return err
	})
	if err != nil {
		return nil, evalrun.Prior{}, fmt.Errorf("read spend ledger of eval request %s: %w", requestID, err)
	}
	return j, prior, nil
}

// load reads every ledger record of the request: the spend of its calls
// (a reserved, never settled call at its reservation: the endpoint may
// have been paid), the cases graded, and the cases lost (a paid call with
// a cost, or never settled, and no case record).
func (j *Journal) load(ctx context.Context) (evalrun.Prior, error) {
	prior := evalrun.Prior{Spend: llm.Spend{Est: map[string]int64{}}, Cases: map[string]evalrun.PriorCase{}, Lost: map[string]int64{}}
	w, err := j.kv.Watch(ctx, j.prefix+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return prior, err
	}
	defer func() { _ = w.Stop() }()
	spent := map[string]int64{} // case -> micro-dollars of its calls
	lost := map[string]bool{}   // case -> a call that cost or whose outcome is unknown
	for {
		var e jetstream.KeyValueEntry
		select {
		case e = <-w.Updates():
		case <-ctx.Done():
			return prior, ctx.Err()
		}
		if e == nil {
			break // the current values are all read
		}
		j.known = append(j.known, e.Key())
		rest := strings.TrimPrefix(e.Key(), j.prefix+".")
		switch {
		case strings.HasPrefix(rest, "call."):
			var c ledgerCall
			if err := json.Unmarshal(e.Value(), &c); err != nil {
				return prior, fmt.Errorf("ledger record %s unreadable: %w", e.Key(), err)
			}
			prior.Spend.Micro += c.Micro
			spent[c.Case] += c.Micro
			switch {
			case c.State != callSettled:
				prior.Spend.Calls++
				lost[c.Case] = true
			case c.Paid:
				prior.Spend.Calls++
			}
			if c.State == callSettled && c.Micro > 0 {
				lost[c.Case] = true
				prior.Spend.Est[c.Model] = max(prior.Spend.Est[c.Model], c.Micro)
			}
		case strings.HasPrefix(rest, "case."):
			var c ledgerCase
			if err := json.Unmarshal(e.Value(), &c); err != nil {
				return prior, fmt.Errorf("ledger record %s unreadable: %w", e.Key(), err)
			}
			prior.Cases[c.Case] = c.PriorCase
		}
	}
	for id := range lost {
		if _, graded := prior.Cases[id]; !graded && id != "" {
			prior.Lost[id] = spent[id]
		}
	}
	return prior, nil
}

func (j *Journal) callKey(seq int) string {
	return j.prefix + ".call." + j.attempt + "." + strconv.Itoa(seq)
}

func (j *Journal) put(ctx context.Context, key string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := j.retry.Do(ctx, "write spend ledger", func(ctx context.Context) error {
		_, err := j.kv.Put(ctx, key, b)
		return err
	}); err != nil {
		return err
	}
	j.mu.Lock()
	j.known = append(j.known, key)
	j.mu.Unlock()
	return nil
}

// Reserve records the call as reserved, durably, before it is made.
func (j *Journal) Reserve(ctx context.Context, c llm.LedgerCall) error {
	j.mu.Lock()
	j.paid[c.Case] = true
	j.mu.Unlock()
	return j.put(ctx, j.callKey(c.Seq), ledgerCall{Case: c.Case, Model: c.Model, Micro: c.Micro, State: callReserved})
}

// Settle records the call's priced cost.
func (j *Journal) Settle(ctx context.Context, c llm.LedgerCall) error {
	return j.put(ctx, j.callKey(c.Seq), ledgerCall{Case: c.Case, Model: c.Model, Micro: c.Micro, State: callSettled, Paid: c.Paid})
}

// CaseDone records the score of a case that made paid calls in this
// attempt (one that made none costs nothing to grade again). A failure is
// logged: the case is then lost if the attempt dies.
func (j *Journal) CaseDone(ctx context.Context, s grading.Score, digest string) {
	j.mu.Lock()
	paid := j.paid[s.CaseID]
	j.mu.Unlock()
	if !paid {
		return
	}
	sum := sha256.Sum256([]byte(s.CaseID))
	key := j.prefix + ".case." + hex.EncodeToString(sum[:16])
	if err := j.put(ctx, key, ledgerCase{Case: s.CaseID, PriorCase: evalrun.PriorCase{Digest: digest, Score: s}}); err != nil {
		j.logger.Warn("eval case not recorded in the spend ledger: lost if this attempt dies", "case", s.CaseID, "err", err)
	}
}

// Forget deletes the ledger's records once the request is done (its run,
// with the spend, is stored and claimed done). Failures are joined; the
// bucket's TTL removes what is left.
func (j *Journal) Forget(ctx context.Context) error {
	j.mu.Lock()
	keys := append([]string(nil), j.known...)
	j.mu.Unlock()
	var errs []error
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k] {
			continue
		}
		seen[k] = true
		if err := j.retry.Do(ctx, "purge spend ledger", func(ctx context.Context) error { return j.kv.Purge(ctx, k) }); err != nil {
			errs = append(errs, fmt.Errorf("purge %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}
