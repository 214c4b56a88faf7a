package ids

import (
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestNew(t *testing.T) {
	now := time.Date(2026, 12, 7, 13, 18, 31, 999, time.FixedZone("x", 3600))
	a, b := New("run", now), New("run", now)
	require.Regexp(t, regexp.MustCompile(`^run-20261207T121831Z-[0-9a-f]{8}$`), a, "UTC, to the second")
	require.NotEqual(t, a, b)
	require.Less(t, New("run", now), New("run", now.Add(time.Second)), "later ids sort after")
}
