package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestStartRetrierSpendsItsBudget: a step that keeps failing is retried
// until the deadline itself, not given up a backoff before it, and the
// give-up comes within one attempt's timeout of the deadline.
func TestStartRetrierSpendsItsBudget(t *testing.T) {
	const budget = 3 * time.Second
	start := time.Now()
	s := &startRetrier{deadline: start.Add(budget), log: slog.New(slog.DiscardHandler)}
	var last time.Time
	err := s.do(context.Background(), "connect", func(context.Context) error {
		last = time.Now()
		return errors.New("connection refused")
	})
	require.Error(t, err)
	require.False(t, last.Before(start.Add(budget)), "the last attempt is at the deadline: %v after start", last.Sub(start))
	require.Less(t, time.Since(start), budget+2*time.Second)
}
