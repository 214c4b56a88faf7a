package lease

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/testkit/jstest"
)

// TestLeaseRenewsItselfAndIsLostOnlyToAnotherHolder: the lease is renewed
// from the moment it is taken, with nobody driving it; a revision moved
// by our own write (a lost reply) or a key gone (expired while NATS was
// away) is taken back; only another holder's value loses it.
func TestLeaseRenewsItselfAndIsLostOnlyToAnotherHolder(t *testing.T) {
	e := newEnv(t)
	ctx := jstest.Ctx(t, 30*time.Second)
	const ttl = 600 * time.Millisecond
	l, err := Acquire(ctx, e.JS, "inst-1", "host:/a", Options{TTL: ttl})
	require.NoError(t, err)
	t.Cleanup(l.Release)
	kv, err := e.JS.KeyValue(ctx, Bucket)
	require.NoError(t, err)
	entry, err := kv.Get(ctx, "inst-1")
	require.NoError(t, err)
	first := entry.Revision()

	// Renewed past its TTL without anyone calling anything.
	advancedBy := func(n uint64) func() error {
		start := uint64(0)
		return func() error {
			e, err := kv.Get(ctx, "inst-1")
			if err != nil {
				return err
			}
			if string(e.Value()) != "host:/a" {
				return fmt.Errorf("key holds %q", e.Value())
			}
			if start == 0 {
				start = e.Revision()
			}
			if e.Revision() < start+n {
				return fmt.Errorf("revision %d, want %d", e.Revision(), start+n)
			}
			return nil
		}
	}
	jstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, advancedBy(4))
	entry, err = kv.Get(ctx, "inst-1")
	require.NoError(t, err)
	require.GreaterOrEqual(t, entry.Revision(), first+4, "four renewals: more than the TTL went by")
	require.True(t, l.Held())

	// Our own value written behind the lease's back (its reply lost).
	_, err = kv.Put(ctx, "inst-1", []byte("host:/a"))
	require.NoError(t, err)
	jstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, advancedBy(2))

	// The key gone (it expired while NATS did not answer): taken again.
	require.NoError(t, kv.Delete(ctx, "inst-1"))
	jstest.CheckFor(t, 20*time.Second, 20*time.Millisecond, advancedBy(2))
	select {
	case <-l.Lost():
		t.Fatalf("lease lost with no other holder: %v", l.Err())
	default:
	}

	// Another holder's value: lost, naming it.
	_, err = kv.Put(ctx, "inst-1", []byte("host:/b"))
	require.NoError(t, err)
	select {
	case <-l.Lost():
	case <-ctx.Done():
		t.Fatal("another holder's value did not lose the lease")
	}
	require.ErrorIs(t, l.Err(), ErrInstanceInUse)
	require.Contains(t, l.Err().Error(), "host:/b")
	require.False(t, l.Held())
	l.Release()
	entry, err = kv.Get(ctx, "inst-1")
	require.NoError(t, err)
	require.Equal(t, "host:/b", string(entry.Value()), "a lost lease's release leaves the new holder's key")
}
