package evalreq

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
