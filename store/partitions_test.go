package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestPartitionCommitDropsAndReadsRuns: a commit replaces the runs it
// names and removes those it drops, in the same transaction; PartitionRun
// reads one.
func TestPartitionCommitDropsAndReadsRuns(t *testing.T) {
	st, _ := openTest(t)
	ctx := context.Background()
	head := PartitionMeta{LastSeq: 1, Meta: []byte{1}}
	require.NoError(t, st.CommitPartition(ctx, 2, PartitionCommit{Head: head,
		Runs: []RunState{{Run: []byte("a"), State: []byte("1")}, {Run: []byte("b"), State: []byte("2")}}}))
	got, ok, err := st.PartitionRun(ctx, 2, []byte("b"))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []byte("2"), got)
	_, ok, err = st.PartitionRun(ctx, 3, []byte("b"))
	require.NoError(t, err)
	require.False(t, ok, "another partition's run")

	head.LastSeq = 2
	require.NoError(t, st.CommitPartition(ctx, 2, PartitionCommit{Head: head, Drop: [][]byte{[]byte("a")},
		Runs: []RunState{{Run: []byte("b"), State: []byte("3")}}}))
	runs := map[string]string{}
	require.NoError(t, st.EachPartitionRun(ctx, 2, func(run, state []byte) error {
		runs[string(run)] = string(state)
		return nil
	}))
	require.Equal(t, map[string]string{"b": "3"}, runs)
}
