package tracemsg

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/envelope"
)

// Dedupe keys identify a call, never its position in a run: two calls of
// one run may legitimately share a step (a blocked call and its allowed
// retry), and both count. This file is the one place the keys are defined.
//
//   - a Parquet segment row: RowKey(digest, row), the segment's content
//     digest and the row index (a row batch carries both, so every cut of
//     a segment into batches names a row alike);
//   - a per-call NDJSON record: its call_id field when present, scoped by
//     its run id ("call:<run_id>:<call_id>", so per-run call counters of two
//     runs never collide), else "msg:" + the message's Nats-Msg-Id, else
//     "sha256:" + the digest of
//     the record's canonical bytes: every field of the decoded record in a
//     fixed order, each marked present or absent, integers exact, strings
//     length-prefixed, attributes in their RFC 8785 form (so the same
//     record published twice without an id counts once, whatever its key
//     order or spacing). The
//     digest key leads with the record's run id ("run:<run_id>:<digest>"),
//     which changes nothing about identity (the run id is part of the
//     record) but keeps a run's calls together in the store's key order, so
//     inserts stay local instead of landing on random pages.

// RowKey is the dedupe key of row of the segment with this content
// digest (hex): what partitions a row without a run id, and names it in
// its partition's state.
func RowKey(digest string, row uint64) string { return fmt.Sprintf("msg:seg:%s:%d", digest, row) }

// MsgIDKey is the dedupe key of a record identified by its Nats-Msg-Id.
func MsgIDKey(id string) string { return "msg:" + id }

// RecordKey returns the dedupe key of a decoded per-call record message:
// its call_id, else its message id, else the digest of its canonical
// bytes. It fails only for attributes that are not valid JSON.
func RecordKey(rec *calls.CallRecord, msgID string) (string, error) {
	switch {
	case rec.CallID != "":
		run := ""
		if rec.RunID != nil {
			run = *rec.RunID
		}
		return "call:" + strconv.Quote(run) + ":" + rec.CallID, nil
	case msgID != "":
		return MsgIDKey(msgID), nil
	}
	sum, err := recordDigest(rec)
	if err != nil {
		return "", err
	}
	if rec.RunID != nil {
		// Within one run 64 bits suffice (a million calls in a run collide
		// with odds below 1e-7), and a short key keeps the store's pages full.
		return "run:" + *rec.RunID + ":" + hex.EncodeToString(sum[:8]), nil
	}
	return "sha256:" + hex.EncodeToString(sum[:16]), nil // 128 bits: collisions are out of reach
}

// recordDigest hashes the canonical bytes of a record (see the keys above).
func recordDigest(rec *calls.CallRecord) ([sha256.Size]byte, error) {
	b := make([]byte, 0, 512) // on the stack for the usual record
	str := func(p *string) {
		if p == nil {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(len(*p)))
		b = append(b, *p...)
	}
	num := func(present bool, v uint64) {
		if !present {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, v)
	}
	i64 := func(p *int64) {
		if p == nil {
			num(false, 0)
		} else {
			num(true, uint64(*p))
		}
	}
	u64 := func(p *uint64) {
		if p == nil {
			num(false, 0)
		} else {
			num(true, *p)
		}
	}
	u32 := func(p *uint32) {
		if p == nil {
			num(false, 0)
		} else {
			num(true, uint64(*p))
		}
	}
	r := rec
	b = append(b, "verdryx-call-v1"...)
	i64(r.TSMillis)
	str(r.RunID)
	str(r.Model)
	str(r.Decision)
	u64(r.InputTokens)
	u64(r.OutputTokens)
	i64(r.CostMicroUSD)
	u32(r.Step)
	str(r.AgentID)
	i64(r.SavedMicroUSD)
	str(r.ParentRunID)
	str(r.OnBehalfOf)
	str(r.Outcome)
	str(r.KeyID)
	str(r.Unit)
	u32(r.ToolCalls)
	if r.CostUSD == nil {
		num(false, 0)
	} else {
		num(true, math.Float64bits(*r.CostUSD))
	}
	if len(r.Attributes) == 0 {
		str(nil)
	} else {
		canon, err := envelope.CanonicalizeJSON(r.Attributes)
		if err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("field attributes: %w", err)
		}
		s := string(canon)
		str(&s)
	}
	return sha256.Sum256(b), nil
}

// KeySize is the size of a stored dedupe key: 128 bits of the key's
// SHA-256.
const KeySize = 16

// Key is the stored form of a dedupe key (HashKey).
type Key = [KeySize]byte

// HashKey returns the stored form of a dedupe key (RecordKey, RowKey):
// the first KeySize bytes of its SHA-256.
func HashKey(key string) Key {
	sum := sha256.Sum256([]byte(key))
	return Key(sum[:KeySize])
}
