package worker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// Dedupe keys identify a call, never its position in a run: two calls of
// one run may legitimately share a step (a blocked call and its allowed
// retry), and both count. This file is the one place the keys are defined.
//
//   - a Parquet segment row: its message id SegmentRowID(digest, row), the
//     segment's content digest and the row index (replay publishes it as
//     Nats-Msg-Id, a segment reference uses the same key, so the two paths
//     deduplicate against each other);
//   - a per-call NDJSON record: "call:" + its call_id field when present,
//     else "msg:" + the message's Nats-Msg-Id, else "sha256:" + the digest of
//     the record's canonical bytes: the decoded record encoded again in its
//     fixed field order, integers exact (so the same record published twice
//     without an id counts once, whatever its key order or spacing).

// SegmentRowID is the message id of row of the segment with this content
// digest.
func SegmentRowID(digest string, row uint64) string {
	return fmt.Sprintf("seg:%s:%d", digest, row)
}

// RowKey is the dedupe key of a segment row.
func RowKey(digest string, row uint64) string { return MsgIDKey(SegmentRowID(digest, row)) }

// MsgIDKey is the dedupe key of a record identified by its Nats-Msg-Id.
func MsgIDKey(id string) string { return "msg:" + id }

// RecordKey returns the dedupe key of a decoded per-call record message:
// its call_id, else its message id, else the digest of its canonical
// bytes.
func RecordKey(rec *CallRecord, msgID string) (string, error) {
	switch {
	case rec.CallID != "":
		return "call:" + rec.CallID, nil
	case msgID != "":
		return MsgIDKey(msgID), nil
	}
	canon, err := json.Marshal(rec)
	if err != nil {
		return "", fmt.Errorf("canonical form for the dedupe digest: %w", err)
	}
	sum := sha256.Sum256(canon)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}
