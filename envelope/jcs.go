package envelope

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// CanonicalizeJSON returns the RFC 8785 (JCS) canonical form of a JSON text.
// It is the reference path used to hash events read from files; the writer
// encodes its own Go values directly with the same rules.
func CanonicalizeJSON(raw []byte) ([]byte, error) {
	out, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("canonicalize: %w", err)
	}
	return out, nil
}

// hashBytes returns "sha256:" + lowercase hex SHA-256 of b: the hash of
// an event is hashBytes of its canonical form.
func hashBytes(b []byte) string {
	sum := sha256.Sum256(b)
	var out [7 + 64]byte
	copy(out[:], "sha256:")
	hex.Encode(out[7:], sum[:])
	return string(out[:])
}

// lessUTF16 orders strings by their UTF-16 code units, as JCS sorts keys.
func lessUTF16(a, b string) bool {
	// Fast path: while both are ASCII the byte order is the UTF-16 order.
	for i := 0; i < len(a) && i < len(b); i++ {
		ca, cb := a[i], b[i]
		if ca >= utf8.RuneSelf || cb >= utf8.RuneSelf {
			return compareUTF16(a[i:], b[i:]) < 0
		}
		if ca != cb {
			return ca < cb
		}
	}
	return len(a) < len(b)
}

func compareUTF16(a, b string) int {
	ua := utf16.Encode([]rune(a))
	ub := utf16.Encode([]rune(b))
	for i := 0; i < len(ua) && i < len(ub); i++ {
		if ua[i] != ub[i] {
			if ua[i] < ub[i] {
				return -1
			}
			return 1
		}
	}
	return len(ua) - len(ub)
}

// appendCanonical writes the JCS form of a Go value built from the types
// encoding/json produces (map[string]any, []any, string, bool, nil,
// float64, json.Number) plus common integer types, []string,
// map[string]string and json.RawMessage (canonicalized through the
// reference implementation).
func appendCanonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		if x {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case string:
		appendString(buf, x)
	case float64:
		return appendFloat(buf, x)
	case float32:
		return appendFloat(buf, float64(x))
	case int:
		return appendFloat(buf, float64(x))
	case int64:
		return appendFloat(buf, float64(x))
	case int32:
		return appendFloat(buf, float64(x))
	case uint64:
		return appendFloat(buf, float64(x))
	case uint32:
		return appendFloat(buf, float64(x))
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return fmt.Errorf("canonicalize number %q: %w", string(x), err)
		}
		return appendFloat(buf, f)
	case json.RawMessage:
		c, err := CanonicalizeJSON(x)
		if err != nil {
			return err
		}
		buf.Write(c)
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := appendCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case []string:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendString(buf, e)
		}
		buf.WriteByte(']')
	case map[string]any:
		buf.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendString(buf, k)
			buf.WriteByte(':')
			if err := appendCanonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case map[string]string:
		buf.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				buf.WriteByte(',')
			}
			appendString(buf, k)
			buf.WriteByte(':')
			appendString(buf, x[k])
		}
		buf.WriteByte('}')
	default:
		// Anything else goes through encoding/json and the reference
		// canonicalizer: slower, but exact.
		raw, err := json.Marshal(x)
		if err != nil {
			return fmt.Errorf("canonicalize %s: %w", typeName(v), err)
		}
		return appendCanonical(buf, json.RawMessage(raw))
	}
	return nil
}

// appendFloat writes f in ECMAScript Number.prototype.toString form.
func appendFloat(buf *bytes.Buffer, f float64) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return fmt.Errorf("canonicalize: %v is not a JSON number", f)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e21 {
		if f == 0 {
			buf.WriteByte('0') // -0 serializes as 0
			return nil
		}
		var tmp [24]byte
		buf.Write(strconv.AppendFloat(tmp[:0], f, 'f', -1, 64))
		return nil
	}
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return fmt.Errorf("canonicalize: %w", err)
	}
	buf.WriteString(s)
	return nil
}

const hexDigits = "0123456789abcdef"

// appendString writes s with JCS string escaping: only '"', '\\' and control
// characters are escaped; everything else is raw UTF-8. Invalid UTF-8 is
// replaced by U+FFFD, as encoding/json does.
func appendString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf.WriteString(s[start:i])
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\b':
				buf.WriteString(`\b`)
			case '\f':
				buf.WriteString(`\f`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte(hexDigits[c>>4])
				buf.WriteByte(hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString("\ufffd")
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}

// appendEvent writes the canonical form of e. Without unknown members it
// writes the known members directly in their JCS order; with them it merges
// through a map.
func appendEvent(buf *bytes.Buffer, e *Event, withPrev bool) error {
	if len(e.Extra) > 0 {
		return appendCanonical(buf, e.members(withPrev))
	}
	// Known members in UTF-16 order: agent_id, data, on_behalf_of,
	// prev_hash, run_id, schema, severity, source, ts, type.
	buf.WriteString(`{"agent_id":`)
	appendString(buf, e.AgentID)
	if e.Data != nil || e.present["data"] {
		buf.WriteString(`,"data":`)
		if e.Data == nil {
			buf.WriteString("{}")
		} else if err := appendCanonical(buf, e.Data); err != nil {
			return err
		}
	}
	if e.OnBehalfOf != nil || e.present["on_behalf_of"] {
		buf.WriteString(`,"on_behalf_of":`)
		if err := appendCanonical(buf, e.OnBehalfOf); err != nil {
			return err
		}
	}
	if withPrev && (e.PrevHash != "" || e.present["prev_hash"]) {
		buf.WriteString(`,"prev_hash":`)
		appendString(buf, e.PrevHash)
	}
	if e.RunID != "" || e.present["run_id"] {
		buf.WriteString(`,"run_id":`)
		appendString(buf, e.RunID)
	}
	buf.WriteString(`,"schema":`)
	appendString(buf, e.Schema)
	if e.Severity != "" || e.present["severity"] {
		buf.WriteString(`,"severity":`)
		appendString(buf, e.Severity)
	}
	buf.WriteString(`,"source":`)
	appendString(buf, e.Source)
	buf.WriteString(`,"ts":`)
	appendString(buf, e.TS)
	buf.WriteString(`,"type":`)
	appendString(buf, e.Type)
	buf.WriteByte('}')
	return nil
}
