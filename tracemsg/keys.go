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
//   - a per-call NDJSON record: its call_id field when not "", scoped by
//     its run id (`call:"<run_id>":<call_id>`, the run id Go-quoted, so
//     per-run call counters of two runs never collide), else "msg:" + the
//     message's Nats-Msg-Id, else the digest of the record's canonical
//     bytes (recordDigest: every field in a fixed order, each marked
//     present or absent, so the same record published twice without an id
//     counts once, whatever its key order or spacing): "run:<run_id>:" and
//     64 bits of it for a record with a run id (within one run a million
//     calls collide with odds below 1e-7), "sha256:" and 128 bits without.
//
// A key is stored as HashKey's 16 bytes; its text only has to be unique.

// RowKey is the dedupe key of row of the segment with this content
// digest (hex): what partitions a row without a run id, and names it in
// its partition's state.
func RowKey(digest string, row uint64) string { return fmt.Sprintf("msg:seg:%s:%d", digest, row) }

// MsgIDKey is the dedupe key of a record identified by its Nats-Msg-Id.
func MsgIDKey(id string) string { return "msg:" + id }

// RecordKey returns the dedupe key of a decoded per-call record message:
// its call_id (when not ""), else its message id, else the digest of its
// canonical bytes. It fails only for attributes that are not valid JSON.
func RecordKey(rec *calls.Record, msgID string) (string, error) {
	switch {
	case len(rec.CallID) != 0:
		return "call:" + strconv.Quote(string(rec.Strings[calls.FieldRunID])) + ":" + string(rec.CallID), nil
	case msgID != "":
		return MsgIDKey(msgID), nil
	}
	sum, err := recordDigest(rec)
	if err != nil {
		return "", err
	}
	if rec.HasField(calls.FieldRunID) {
		return "run:" + string(rec.Strings[calls.FieldRunID]) + ":" + hex.EncodeToString(sum[:8]), nil
	}
	return "sha256:" + hex.EncodeToString(sum[:16]), nil // 128 bits: collisions are out of reach
}

// recordDigest hashes the canonical bytes of a record (see the keys
// above): "verdryx-call-v1", then each column in Field order, cost_usd and
// attributes, each as 0 (absent) or 1 and its value: an integer as 8
// bytes big-endian (two's complement for a signed one, the IEEE 754 bits
// for cost_usd), a string as its 8-byte big-endian length and its bytes,
// attributes as the string of its RFC 8785 form. call_id is not in it.
// The bytes are pinned (TestRecordKeysArePinned): partition state stores
// the keys.
func recordDigest(rec *calls.Record) ([sha256.Size]byte, error) {
	b := make([]byte, 0, 512) // on the stack for the usual record
	str := func(present bool, s []byte) {
		if !present {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
		b = append(b, s...)
	}
	num := func(present bool, v uint64) {
		if !present {
			b = append(b, 0)
			return
		}
		b = append(b, 1)
		b = binary.BigEndian.AppendUint64(b, v)
	}
	b = append(b, "verdryx-call-v1"...)
	for f := range calls.NumFields {
		has := rec.HasField(f)
		switch f {
		case calls.FieldTSMillis:
			num(has, uint64(rec.TSMillis))
		case calls.FieldInputTokens:
			num(has, rec.InputTokens)
		case calls.FieldOutputTokens:
			num(has, rec.OutputTokens)
		case calls.FieldCostMicroUSD:
			num(has, uint64(rec.CostMicroUSD))
		case calls.FieldStep:
			num(has, uint64(rec.Step))
		case calls.FieldSavedMicroUSD:
			num(has, uint64(rec.SavedMicroUSD))
		case calls.FieldToolCalls:
			num(has, uint64(rec.ToolCalls))
		default:
			str(has, rec.Strings[f])
		}
	}
	num(rec.HasCostUSD(), math.Float64bits(rec.CostUSD))
	if len(rec.Attributes) == 0 {
		str(false, nil)
	} else {
		canon, err := envelope.CanonicalizeJSON(rec.Attributes)
		if err != nil {
			return [sha256.Size]byte{}, fmt.Errorf("field attributes: %w", err)
		}
		str(true, canon)
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
