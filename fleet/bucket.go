package fleet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/internal/strictjson"
	"github.com/verdryx/verdryx/partstate"
	"github.com/verdryx/verdryx/streams"
)

// partitionKey is partition p's key in the Bucket KV bucket.
func partitionKey(p int) string { return "partition." + strconv.Itoa(p) }

// partPointer is the value of a partition's KV key.
type partPointer struct {
	Partition  int     `json:"partition"`
	Partitions int     `json:"partitions"`
	LastSeq    uint64  `json:"last_seq"`
	Snapshot   blobRef `json:"snapshot"`
	Aggregate  blobRef `json:"aggregate"`
	// Deltas follow Snapshot (and Aggregate), in order (see delta.go).
	Deltas  []blobRef `json:"deltas,omitempty"`
	Writer  string    `json:"writer"`
	Runs    int       `json:"runs"` // run partial states in memory (per run and day or hour)
	Keys    int       `json:"keys"`
	Written time.Time `json:"written"`
}

// decodePointer decodes partition p's pointer strictly: a pointer another
// build wrote with fields this one does not know is refused, named, not
// read in part.
func decodePointer(p int, b []byte) (partPointer, error) {
	var ptr partPointer
	if err := strictjson.Decode(b, &ptr); err != nil {
		return ptr, fmt.Errorf("partition %d pointer: %w", p, err)
	}
	return ptr, nil
}

// blobRef names a chunked value in the Bucket KV bucket.
type blobRef = partstate.BlobRef

// blobChunk is the largest chunk of a snapshot or aggregate (under the
// default 1 MiB max payload).
const blobChunk = 512 << 10

func putBlob(ctx context.Context, kv jetstream.KeyValue, prefix string, data []byte) (blobRef, error) {
	sum := sha256.Sum256(data)
	ref := blobRef{Prefix: prefix, SHA256: hex.EncodeToString(sum[:]), Size: len(data)}
	for off := 0; off == 0 || off < len(data); off += blobChunk {
		end := min(off+blobChunk, len(data))
		if _, err := kv.Put(ctx, prefix+"."+strconv.Itoa(ref.Chunks), data[off:end]); err != nil {
			return blobRef{}, fmt.Errorf("put %s: %w", prefix, err)
		}
		ref.Chunks++
	}
	return ref, nil
}

// errBlobChanged is a chunked value overwritten while it was read (its
// writer moved on two snapshots): read the pointer again.
var errBlobChanged = errors.New("digest mismatch (overwritten while read)")

// getBlob reads a chunked value and checks its digest.
func getBlob(ctx context.Context, kv jetstream.KeyValue, ref blobRef) ([]byte, error) {
	data := make([]byte, 0, ref.Size)
	for i := range ref.Chunks {
		e, err := kv.Get(ctx, ref.Prefix+"."+strconv.Itoa(i))
		if err != nil {
			return nil, fmt.Errorf("get %s chunk %d: %w", ref.Prefix, i, err)
		}
		data = append(data, e.Value()...)
	}
	sum := sha256.Sum256(data)
	if hex.EncodeToString(sum[:]) != ref.SHA256 {
		return nil, fmt.Errorf("get %s: %w", ref.Prefix, errBlobChanged)
	}
	return data, nil
}

// EnsureBucket creates (or binds, updating an existing bucket with
// other replicas) the KV bucket Bucket with the given replicas (0
// means 1).
func EnsureBucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.KeyValue, error) {
	kv, err := streams.EnsureKV(ctx, js, jetstream.KeyValueConfig{Bucket: Bucket, History: 1, Replicas: max(replicas, 1),
		Description: "verdryx: per-partition snapshot pointers, snapshots and aggregates"})
	if err != nil {
		return nil, fmt.Errorf("kv bucket %s: %w", Bucket, err)
	}
	return kv, nil
}

// sweep lists the bucket's names of partition h.p once (a load's best
// effort: a failure is logged and left for the next load) for
// sweepPrunedDays and sweepLeftovers.
func (h *partHandler) sweep(ctx context.Context, s *partstate.State) {
	info, err := h.f.kvStream.Info(ctx, jetstream.WithSubjectFilter(kvSubjects+"*."+strconv.Itoa(h.p)+".>"))
	if err != nil {
		h.f.log.Debug("list the bucket's names of the partition", "partition", h.p, "err", err)
		return
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subj, kvSubjects))
	}
	h.sweepPrunedDays(ctx, s, keys)
	h.sweepLeftovers(ctx, h.blobs, keys)
}

// kvSubjects is what the subjects of the bucket's keys start with.
const kvSubjects = "$KV." + Bucket + "."

// defaultLeftoverAge is how long after its last write a snapshot,
// aggregate or delta blob of another writer that the partition's pointer
// does not name is taken for a leftover: a writer that is still alive
// moves the pointer within seconds of its puts, or fails to and never
// reads the blob again.
const defaultLeftoverAge = time.Hour

// sweepLeftovers removes the partition's snapshot, aggregate and delta
// blobs (among keys, the partition's keys in the bucket) that named (the
// pointer's) does not name: this worker's own,
// which an earlier process of its instance wrote (one live worker holds an
// instance, and this one has written nothing of the partition since it
// loaded it), and other writers' last written more than
// defaultLeftoverAge ago. A writer leaves its other slots behind when the
// partition moves away from it, so without the sweep the bucket would
// keep up to two snapshots, an aggregate and a few deltas per partition
// of every instance that ever owned it: with workers whose names change
// at each start (a pod name), growth without end. Best effort, like
// sweepPrunedDays: a failure is logged and left for the next load.
func (h *partHandler) sweepLeftovers(ctx context.Context, named []blobRef, keys []string) {
	isNamed := map[string]bool{}
	for _, b := range named {
		isNamed[b.Prefix] = true
	}
	age := h.f.opts.leftoverAge
	if age <= 0 {
		age = defaultLeftoverAge
	}
	removed := 0
	for _, kind := range []string{"snap", "agg", "delta"} {
		names := kind + "." + strconv.Itoa(h.p) + "."
		// A blob is <kind>.<p>.<writer>.<slot> and a chunk index after it;
		// one of its chunks' keys is kept to read its age.
		blobs := map[string]string{}
		for _, key := range keys {
			if i := strings.LastIndexByte(key, '.'); strings.HasPrefix(key, names) && i > len(names) {
				blobs[key[:i]] = key
			}
		}
		for prefix, key := range blobs {
			if isNamed[prefix] {
				continue
			}
			writer := strings.TrimPrefix(prefix, names)
			if i := strings.LastIndexByte(writer, '.'); i >= 0 {
				writer = writer[:i]
			}
			if writer != h.f.opts.Instance {
				m, err := h.f.kvStream.GetLastMsgForSubject(ctx, kvSubjects+key)
				if err != nil || time.Since(m.Time) < age { // server time, not the retention clock
					continue
				}
			}
			if err := h.f.purgeKeys(ctx, prefix+".>"); err != nil {
				h.f.log.Debug("purge a leftover blob", "partition", h.p, "blob", prefix, "err", err)
				return
			}
			removed++
		}
	}
	if removed > 0 {
		h.f.log.Info("removed blobs no pointer names", "partition", h.p, "blobs", removed)
	}
}

// sweepPrunedDays removes what the bucket still holds under the names of
// days s has pruned: the delete markers of a build before purges by
// subject, a former owner's tables, anything a prune that failed left. A
// pruned day's name is never written again (its calls are late), so no
// writer races the purge. keys are the partition's keys in the bucket
// (sweep lists them once per load). Best effort: a failure is logged and
// left for the next load.
func (h *partHandler) sweepPrunedDays(ctx context.Context, s *partstate.State, keys []string) {
	if len(s.Pruned) == 0 {
		return
	}
	prefix := dayNamesPrefix(h.p)
	var days []int32
	for _, key := range keys {
		rest, ok := strings.CutPrefix(key, prefix)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, ".")
		d, err := strconv.ParseInt(name, 10, 32)
		if err == nil && s.IsPruned(int32(d)) && !slices.Contains(days, int32(d)) {
			days = append(days, int32(d))
		}
	}
	for _, d := range days {
		if err := h.f.purgeKeys(ctx, dayBlobPrefix(h.p, d)+".>"); err != nil {
			h.f.log.Debug("purge a pruned day's leftovers", "partition", h.p, "day", partstate.DayString(d), "err", err)
			return
		}
	}
	if len(days) > 0 {
		h.f.log.Info("removed what the bucket held of pruned days", "partition", h.p, "days", len(days))
	}
}

// deleteBlob removes a blob's chunks from the bucket, logging a failure
// (a leftover blob is only unused space).
func (h *partHandler) deleteBlob(ctx context.Context, ref blobRef) {
	for i := range ref.Chunks {
		if err := h.f.purgeKeys(ctx, ref.Prefix+"."+strconv.Itoa(i)); err != nil {
			h.f.log.Debug("delete blob", "prefix", ref.Prefix, "err", err)
			return
		}
	}
}

// dayBlobPrefix is the bucket key prefix of partition p's tables of day d:
// a table is named <prefix>.<instance>.<revision>.
func dayBlobPrefix(p int, d int32) string {
	return dayNamesPrefix(p) + strconv.Itoa(int(d))
}

// dayNamesPrefix is what the names of partition p's day tables start with.
func dayNamesPrefix(p int) string { return "day." + strconv.Itoa(p) + "." }

// purgeKeys removes the bucket's keys matching key (a KV key, wildcards
// allowed) with every revision, by subject from the bucket's stream. A KV
// delete or purge would leave a marker per key for good (the bucket has
// no marker TTL): a day table's name holds its revision, so a marker per
// superseded or pruned table, 24 a day at eight partitions, grew the
// bucket with the history (879 of its 952 subjects after 30 days of
// bench soak). Readers of a purged key see it gone either way.
func (f *Fleet) purgeKeys(ctx context.Context, key string) error {
	return f.kvStream.Purge(ctx, jetstream.WithPurgeSubject(kvSubjects+key))
}

// fetchDays reads the tables of s's folded days that want takes (each
// checked against its reference: partition, day, revision) by day; with
// keys, each table's dedupe keys are added to s (a takeover needs them, a
// report does not). A table replaced or removed meanwhile fails with
// errBlobChanged (read the pointer again).
func fetchDays(ctx context.Context, kv jetstream.KeyValue, s *partstate.State, want partstate.DayWindow, keys bool) (map[int32][]byte, error) {
	tables := make(map[int32][]byte, len(s.Folded))
	for _, d := range slices.Sorted(maps.Keys(s.Folded)) {
		if !want.Has(d) {
			continue
		}
		ref := s.Folded[d]
		b, err := getBlob(ctx, kv, ref.Blob)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err = fmt.Errorf("%w: %w", errBlobChanged, err)
		}
		if err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", s.Part, partstate.DayString(d), err)
		}
		part, day, rev, k, err := partstate.DayTableKeys(b)
		if err != nil {
			return nil, fmt.Errorf("partition %d day %s: %w", s.Part, partstate.DayString(d), err)
		}
		if part != s.Part || day != d || rev != ref.Rev {
			return nil, fmt.Errorf("partition %d day %s: the bucket holds partition %d day %s revision %d, want revision %d",
				s.Part, partstate.DayString(d), part, partstate.DayString(day), rev, ref.Rev)
		}
		if keys {
			s.AddFoldedKeysOf(k)
		}
		tables[d] = b
	}
	return tables, nil
}
