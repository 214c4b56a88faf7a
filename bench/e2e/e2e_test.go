package e2e

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSameReportComparesTheTables(t *testing.T) {
	direct := []byte("  outcome  runs\n  resolved  3\ncalls read: 9\nsegments: 1 read\n")
	worker := []byte("replayed 9 rows\ncost per outcome of the traces consumed:\n  outcome  runs\n  resolved  3\ncalls read: 9\n")
	require.True(t, sameReport(direct, worker))
	require.False(t, sameReport(direct, []byte("cost per outcome of the traces consumed:\n  outcome  runs\n  resolved  4\ncalls read: 9\n")))
	require.False(t, sameReport(direct, []byte("cost per outcome of the traces consumed:\n  outcome  runs\n  resolved  3\ncalls read: 8\n")))
	require.False(t, sameReport(direct, []byte("  outcome  runs\n  resolved  3\ncalls read: 9\n")), "no worker header")
	require.False(t, sameReport([]byte("  outcome  runs\n"), worker), "no direct footer")
}
