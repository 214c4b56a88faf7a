package window_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome/window"
)

// TestLast: units, and a count of days or weeks past what a Duration
// holds clamps to the longest one (it wrapped to a later start before).
func TestLast(t *testing.T) {
	for v, want := range map[string]time.Duration{
		"90m": 90 * time.Minute, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour, "2w": 14 * 24 * time.Hour,
		"100000w": time.Duration(math.MaxInt64), "20000000d": time.Duration(math.MaxInt64),
	} {
		got, err := window.Last("--last", v)
		require.NoError(t, err, v)
		require.Equal(t, want, got, v)
	}
	for _, v := range []string{"0d", "-1w", "3y", "d", "soon", ""} {
		_, err := window.Last("--last", v)
		require.Error(t, err, v)
	}
}

// TestParse: last starts on the hour before now minus it and is
// given alone; a date as to means the end of that day.
func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 6, 10, 42, 0, 0, time.UTC)
	o, err := window.Parse("--", "", "", "3h", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC), o.From)
	require.True(t, o.To.IsZero())
	o, err = window.Parse("", "2026-12-01", "2026-12-02", "", now)
	require.NoError(t, err)
	require.Equal(t, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), o.From)
	require.Equal(t, time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC), o.To)
	_, err = window.Parse("--", "2026-12-01", "", "3h", now)
	require.ErrorContains(t, err, "--last: give it alone")
	_, err = window.Parse("", "yesterday", "", "", now)
	require.ErrorContains(t, err, `from "yesterday"`)
}
