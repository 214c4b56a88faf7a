package segpub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"
	"github.com/verdryx/verdryx/calls/rowbatch"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/streams"
	"github.com/verdryx/verdryx/testkit/jstest"
	"github.com/verdryx/verdryx/tracemsg"
)

func TestReplayCorruptSegmentPublishesNothingOfIt(t *testing.T) {
	e := newEnv(t)
	dir, err := filepath.Abs("../testdata/traces/corrupt")
	require.NoError(t, err)
	st, err := Publish(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.Traces, dir, Options{})
	require.NoError(t, err)
	require.Len(t, st.Failed, 1)
	require.Equal(t, 1, st.Segments)
	// The direct reduction rolls the bad segment back whole: its rows are
	// what the good segments hold, and exactly those were published.
	r, err := outcome.NewReducer(outcome.Options{})
	require.NoError(t, err)
	direct, err := segfold.ReduceDir(context.Background(), dir, r, segfold.DirOptions{})
	require.NoError(t, err)
	stream, err := e.JS.Stream(context.Background(), e.Subjects.TracesStream)
	require.NoError(t, err)
	info, err := stream.Info(context.Background())
	require.NoError(t, err)
	require.EqualValues(t, direct.Rows, st.Rows)
	require.EqualValues(t, direct.Rows, info.State.Msgs, "only the good segment's rows were published")

	_, err = Publish(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.Traces, dir, Options{Strict: true})
	require.Error(t, err)
}

// TestBatchesNameTheirSegmentAndRouteEachRow replays segments with and
// without run ids in small batches and reads every batch back from the
// stream: each carries its segment's SHA-256 (computed beside the scan and
// stamped after it) in its header and message id, sits on the subject of
// the partition of each of its rows (by run id, or by the row's key where
// there is none), and every row of the directory is in exactly one batch.
func TestBatchesNameTheirSegmentAndRouteEachRow(t *testing.T) {
	for _, name := range []string{"basic", "norunid", "split", "split-legacy"} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			var dir string
			if name == "split-legacy" {
				dir = legacyCopy(t, "../testdata/traces/split")
			} else {
				var err error
				dir, err = filepath.Abs(filepath.Join("../testdata/traces", name))
				require.NoError(t, err)
			}
			const parts = 3
			st, err := Publish(jstest.Ctx(t, 10*time.Second), e.JS, e.Subjects.Traces, dir, Options{Partitions: parts, BatchRows: 3})
			require.NoError(t, err)
			require.Empty(t, st.Failed)
			r, err := outcome.NewReducer(outcome.Options{})
			require.NoError(t, err)
			direct, err := segfold.ReduceDir(context.Background(), dir, r, segfold.DirOptions{})
			require.NoError(t, err)
			require.EqualValues(t, direct.Rows, st.Rows)

			ctx := context.Background()
			stream, err := e.JS.Stream(ctx, e.Subjects.TracesStream)
			require.NoError(t, err)
			info, err := stream.Info(ctx)
			require.NoError(t, err)
			require.Greater(t, info.State.Msgs, uint64(1), "several batches")
			seen := map[string]bool{}
			var b rowbatch.Batch
			for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
				m, err := stream.GetMsg(ctx, seq)
				require.NoError(t, err)
				require.NoError(t, rowbatch.Decode(m.Data, &b))
				file, err := os.ReadFile(filepath.Join(dir, b.Segment))
				require.NoError(t, err)
				require.Equal(t, sha256.Sum256(file), b.Digest, "batch %d names its segment's digest", seq)
				digest := hex.EncodeToString(b.Digest[:])
				require.Equal(t, streams.TraceSubject(e.Subjects.Traces, b.Part), m.Subject)
				require.Equal(t, batchMsgID(digest, b.Part, b.Rows[0], b.Rows[len(b.Rows)-1]), m.Header.Get(jetstream.MsgIDHeader))
				for i, row := range b.Rows {
					key := tracemsg.RowKey(digest, row)
					if c := b.Calls[i]; c.HasRunID {
						require.Equal(t, tracemsg.PartitionOf(c.RunID, parts), b.Part, "row %d of %s", row, b.Segment)
					} else {
						require.Equal(t, tracemsg.PartitionOf(key, parts), b.Part, "row %d of %s", row, b.Segment)
					}
					require.False(t, seen[key], "row %d of %s published twice", row, b.Segment)
					seen[key] = true
				}
			}
			require.Len(t, seen, int(direct.Rows))
		})
	}
}

// legacyCopy copies the segments of src into a new directory under the
// earlier gateways' names, calls-{seq:08}.parquet, numbered in src's
// segment order, and returns it.
func legacyCopy(t *testing.T, src string) string {
	t.Helper()
	segs, _, err := segment.List(src)
	require.NoError(t, err)
	require.NotEmpty(t, segs)
	dir := t.TempDir()
	for i, s := range segs {
		data, err := os.ReadFile(s.Path)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, fmt.Sprintf("calls-%08d.parquet", i)), data, 0o644))
	}
	return dir
}
