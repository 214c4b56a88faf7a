package calls

import (
	"bytes"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Bits of Record.Has beyond the sixteen columns (bit f is Field f).
const (
	bitCostUSD    = uint(NumFields)
	bitAttributes = uint(NumFields) + 1
	bitCallID     = uint(NumFields) + 2
)

// maxDepth is encoding/json's nesting limit: the top-level object counts as
// depth 1, and a value nested deeper than 10000 is a syntax error.
const maxDepth = 10000

// Record is a per-call record: the one record type of every path (an
// NDJSON line, an element of a JSON array, a CSV row, a trace message, a
// tailed line). Call is its resolved value (Record.Call) and Batch the
// column form of many. Has holds one bit per key present and not null (bit
// f for column f, then cost_usd, attributes and call_id); an absent key's
// value is zero (nil for a string), so a later null of a duplicate key
// leaves no trace. String values,
// Attributes and CallID are byte slices, never copies: into the decoded
// bytes or into the decoder's scratch buffer. How long they stay valid is
// the decoding function's to say (ScanNDJSON: during its callback;
// DecodeRecord: as long as the decoded bytes); they must be copied (or
// interned) to be kept longer.
type Record struct {
	Has           uint32
	TSMillis      int64
	InputTokens   uint64
	OutputTokens  uint64
	CostMicroUSD  int64
	SavedMicroUSD int64
	Step          uint32
	ToolCalls     uint32
	CostUSD       float64
	// Strings holds the string columns, indexed by Field (the numeric
	// columns' entries stay nil).
	Strings [NumFields][]byte
	// Attributes is the raw JSON value of "attributes", byte for byte as
	// encoding/json's json.RawMessage would hold it: free-form data verdryx
	// ignores but for a call's dedupe key.
	Attributes []byte
	// CallID is the value of "call_id" (ColCallID), the call's identity
	// for deduplication on the traces subjects (tracemsg.RecordKey); other
	// readers accept and ignore it.
	CallID []byte
}

// HasField reports whether column f is present and not null.
func (r *Record) HasField(f Field) bool { return r.Has&(1<<f) != 0 }

// HasCostUSD reports whether cost_usd is present and not null.
func (r *Record) HasCostUSD() bool { return r.Has&(1<<bitCostUSD) != 0 }

// setFrom makes r the record the reference decoding ref holds (the rare
// line the fast path left to strictjson.Decode). Strings are copied;
// call_id is present when not empty (the reference form cannot tell "" from
// absent, and a key treats them alike).
func (r *Record) setFrom(ref *refRecord) {
	*r = Record{}
	str := func(f Field, p *string) {
		if p != nil {
			r.Has |= 1 << f
			r.Strings[f] = []byte(*p)
		}
	}
	set := func(f Field, present bool) {
		if present {
			r.Has |= 1 << f
		}
	}
	r.TSMillis = deref(ref.TSMillis)
	set(FieldTSMillis, ref.TSMillis != nil)
	str(FieldRunID, ref.RunID)
	str(FieldModel, ref.Model)
	str(FieldDecision, ref.Decision)
	r.InputTokens = deref(ref.InputTokens)
	set(FieldInputTokens, ref.InputTokens != nil)
	r.OutputTokens = deref(ref.OutputTokens)
	set(FieldOutputTokens, ref.OutputTokens != nil)
	r.CostMicroUSD = deref(ref.CostMicroUSD)
	set(FieldCostMicroUSD, ref.CostMicroUSD != nil)
	r.Step = deref(ref.Step)
	set(FieldStep, ref.Step != nil)
	str(FieldAgentID, ref.AgentID)
	r.SavedMicroUSD = deref(ref.SavedMicroUSD)
	set(FieldSavedMicroUSD, ref.SavedMicroUSD != nil)
	str(FieldParentRunID, ref.ParentRunID)
	str(FieldOnBehalfOf, ref.OnBehalfOf)
	str(FieldOutcome, ref.Outcome)
	str(FieldKeyID, ref.KeyID)
	str(FieldUnit, ref.Unit)
	r.ToolCalls = deref(ref.ToolCalls)
	set(FieldToolCalls, ref.ToolCalls != nil)
	if ref.CostUSD != nil {
		r.Has |= 1 << bitCostUSD
		r.CostUSD = *ref.CostUSD
	}
	if ref.Attributes != nil {
		r.Has |= 1 << bitAttributes
		r.Attributes = ref.Attributes
	}
	if ref.CallID != "" {
		r.Has |= 1 << bitCallID
		r.CallID = []byte(ref.CallID)
	}
}

// RecordDecoder decodes per-call records into a Record: one JSON object
// with the column names, cost_usd, attributes and call_id as keys, exactly
// as strictjson.Decode decodes them into refRecord, the reference form
// (encoding/json with unknown fields refused): keys match exactly or else
// case-insensitively, a later duplicate key wins and null resets a key to
// absent (call_id's null leaves it as it was), numbers must fit their column's Go
// type, strings have their escapes decoded and invalid UTF-8 replaced by
// U+FFFD, "attributes" takes any JSON value, a top-level null is an empty
// record, and only JSON white space may follow the object.
//
// It scans the known keys by hand, with no allocation per record once its
// buffers have grown. It refuses whatever encoding/json refuses; it never
// words the error itself: Decode's callers rerun the reference decoder
// (strictjson.Decode) on a refused line, so errors are word for word those of
// strictjson.Decode, naming the field and byte offset.
//
// A RecordDecoder is not safe for concurrent use; the zero value is ready.
type RecordDecoder struct {
	buf   []byte // unescaped strings of the current record
	stack []byte // open containers while skipping a nested value
}

// Decode decodes data into rec and reports whether data is a record
// strictjson.Decode accepts. On false, rec is undefined: the caller words the
// error with strictjson.Decode (see DecodeRecord). rec's strings are valid
// until d's next Decode.
func (d *RecordDecoder) Decode(data []byte, rec *Record) bool {
	*rec = Record{}
	d.buf = d.buf[:0]
	i := skipWS(data, 0)
	if i >= len(data) {
		return false
	}
	switch data[i] {
	case 'n':
		if !hasLiteral(data, i, "null") {
			return false
		}
		return skipWS(data, i+4) == len(data)
	case '{':
	default:
		return false
	}
	i = skipWS(data, i+1)
	if i < len(data) && data[i] == '}' {
		return skipWS(data, i+1) == len(data)
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return false
		}
		key, j, ok := d.str(data, i)
		if !ok {
			return false
		}
		k := keyIndex(key)
		if k < 0 {
			return false
		}
		i = skipWS(data, j)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		i = skipWS(data, i+1)
		if i >= len(data) {
			return false
		}
		if i, ok = d.value(data, i, k, rec); !ok {
			return false
		}
		i = skipWS(data, i)
		if i >= len(data) {
			return false
		}
		switch data[i] {
		case ',':
			i = skipWS(data, i+1)
		case '}':
			return skipWS(data, i+1) == len(data)
		default:
			return false
		}
	}
}

// keyIndex returns the bit of key, or -1 for a key the record does not
// have: exact match first, then case-insensitive as encoding/json does.
func keyIndex(key []byte) int {
	switch string(key) {
	case ColTSMillis:
		return int(FieldTSMillis)
	case ColRunID:
		return int(FieldRunID)
	case ColModel:
		return int(FieldModel)
	case ColDecision:
		return int(FieldDecision)
	case ColInputTokens:
		return int(FieldInputTokens)
	case ColOutputTokens:
		return int(FieldOutputTokens)
	case ColCostMicroUSD:
		return int(FieldCostMicroUSD)
	case ColStep:
		return int(FieldStep)
	case ColAgentID:
		return int(FieldAgentID)
	case ColSavedMicro:
		return int(FieldSavedMicroUSD)
	case ColParentRunID:
		return int(FieldParentRunID)
	case ColOnBehalfOf:
		return int(FieldOnBehalfOf)
	case ColOutcome:
		return int(FieldOutcome)
	case ColKeyID:
		return int(FieldKeyID)
	case ColUnit:
		return int(FieldUnit)
	case ColToolCalls:
		return int(FieldToolCalls)
	case "cost_usd":
		return int(bitCostUSD)
	case "attributes":
		return int(bitAttributes)
	case ColCallID:
		return int(bitCallID)
	}
	for f := range NumFields {
		if bytes.EqualFold(key, []byte(f.Name())) {
			return int(f)
		}
	}
	switch {
	case bytes.EqualFold(key, []byte("cost_usd")):
		return int(bitCostUSD)
	case bytes.EqualFold(key, []byte("attributes")):
		return int(bitAttributes)
	case bytes.EqualFold(key, []byte(ColCallID)):
		return int(bitCallID)
	}
	return -1
}

// clear makes key k of r absent, its value zero.
func (r *Record) clear(k int) {
	r.Has &^= 1 << uint(k)
	switch {
	case k == int(bitCostUSD):
		r.CostUSD = 0
	case k >= int(NumFields):
	case Field(k) == FieldTSMillis:
		r.TSMillis = 0
	case Field(k) == FieldInputTokens:
		r.InputTokens = 0
	case Field(k) == FieldOutputTokens:
		r.OutputTokens = 0
	case Field(k) == FieldCostMicroUSD:
		r.CostMicroUSD = 0
	case Field(k) == FieldSavedMicroUSD:
		r.SavedMicroUSD = 0
	case Field(k) == FieldStep:
		r.Step = 0
	case Field(k) == FieldToolCalls:
		r.ToolCalls = 0
	default:
		r.Strings[k] = nil
	}
}

// value decodes the value at data[i] (not white space) into key k of rec.
func (d *RecordDecoder) value(data []byte, i, k int, rec *Record) (int, bool) {
	bit := uint32(1) << uint(k)
	if k == int(bitAttributes) {
		end, ok := d.skipValue(data, i)
		if !ok {
			return 0, false
		}
		rec.Has |= bit
		rec.Attributes = data[i:end]
		return end, true
	}
	if data[i] == 'n' {
		if !hasLiteral(data, i, "null") {
			return 0, false
		}
		if k != int(bitCallID) { // a pointer: null resets it; a plain string keeps its value
			rec.clear(k)
		}
		return i + 4, true
	}
	switch {
	case k == int(bitCallID):
		if data[i] != '"' {
			return 0, false
		}
		s, end, ok := d.str(data, i)
		if !ok {
			return 0, false
		}
		rec.CallID = s
		rec.Has |= bit
		return end, true
	case k == int(bitCostUSD):
		end, ok := scanNumber(data, i)
		if !ok {
			return 0, false
		}
		b := data[i:end]
		v, err := strconv.ParseFloat(unsafe.String(unsafe.SliceData(b), len(b)), 64)
		if err != nil {
			return 0, false
		}
		rec.CostUSD = v
		rec.Has |= bit
		return end, true
	}
	f := Field(k)
	switch f {
	case FieldTSMillis, FieldCostMicroUSD, FieldSavedMicroUSD:
		v, end, ok := parseInt64(data, i)
		if !ok {
			return 0, false
		}
		switch f {
		case FieldTSMillis:
			rec.TSMillis = v
		case FieldCostMicroUSD:
			rec.CostMicroUSD = v
		default:
			rec.SavedMicroUSD = v
		}
		rec.Has |= bit
		return end, true
	case FieldInputTokens, FieldOutputTokens, FieldStep, FieldToolCalls:
		v, end, ok := parseUint64(data, i)
		if !ok {
			return 0, false
		}
		switch f {
		case FieldInputTokens:
			rec.InputTokens = v
		case FieldOutputTokens:
			rec.OutputTokens = v
		default:
			if v > 1<<32-1 {
				return 0, false
			}
			if f == FieldStep {
				rec.Step = uint32(v)
			} else {
				rec.ToolCalls = uint32(v)
			}
		}
		rec.Has |= bit
		return end, true
	}
	// A string column.
	if data[i] != '"' {
		return 0, false
	}
	s, end, ok := d.str(data, i)
	if !ok {
		return 0, false
	}
	rec.Strings[f] = s
	rec.Has |= bit
	return end, true
}

// parseInt64 parses the JSON number at data[i] as strconv.ParseInt(s, 10,
// 64) would: an integer without fraction or exponent, in range.
func parseInt64(data []byte, i int) (int64, int, bool) {
	end, ok := scanNumber(data, i)
	if !ok {
		return 0, 0, false
	}
	neg := data[i] == '-'
	j := i
	if neg {
		j++
	}
	var u uint64
	for ; j < end; j++ {
		c := data[j]
		if c < '0' || c > '9' {
			return 0, 0, false // fraction or exponent: not an integer
		}
		if u > (1<<63)/10 {
			return 0, 0, false
		}
		u = u*10 + uint64(c-'0') // at most 1<<63 + 9: no wrap
		if u > 1<<63 {
			return 0, 0, false
		}
	}
	if neg {
		return -int64(u), end, true // -(1<<63) wraps to itself: the minimum
	}
	if u > 1<<63-1 {
		return 0, 0, false
	}
	return int64(u), end, true
}

// parseUint64 parses the JSON number at data[i] as strconv.ParseUint(s,
// 10, 64) would: digits only (no sign, not even "-0"), in range.
func parseUint64(data []byte, i int) (uint64, int, bool) {
	end, ok := scanNumber(data, i)
	if !ok || data[i] == '-' {
		return 0, 0, false
	}
	var u uint64
	for j := i; j < end; j++ {
		c := data[j]
		if c < '0' || c > '9' {
			return 0, 0, false
		}
		if u > (1<<64-1)/10 {
			return 0, 0, false
		}
		n := u*10 + uint64(c-'0')
		if n < u*10 {
			return 0, 0, false
		}
		u = n
	}
	return u, end, true
}

// scanNumber returns the end of the JSON number at data[i]:
// -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func scanNumber(data []byte, i int) (int, bool) {
	n := len(data)
	if i < n && data[i] == '-' {
		i++
	}
	switch {
	case i >= n:
		return 0, false
	case data[i] == '0':
		i++
	case data[i] >= '1' && data[i] <= '9':
		for i++; i < n && isDigit(data[i]); i++ {
		}
	default:
		return 0, false
	}
	if i < n && data[i] == '.' {
		i++
		if i >= n || !isDigit(data[i]) {
			return 0, false
		}
		for i++; i < n && isDigit(data[i]); i++ {
		}
	}
	if i < n && (data[i] == 'e' || data[i] == 'E') {
		i++
		if i < n && (data[i] == '+' || data[i] == '-') {
			i++
		}
		if i >= n || !isDigit(data[i]) {
			return 0, false
		}
		for i++; i < n && isDigit(data[i]); i++ {
		}
	}
	return i, true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func skipWS(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

func hasLiteral(data []byte, i int, lit string) bool {
	return len(data)-i >= len(lit) && string(data[i:i+len(lit)]) == lit
}

// str decodes the JSON string at data[i] (a '"'); it returns the decoded
// bytes (a slice of data when nothing needed decoding, else of d.buf) and
// the index after the closing quote.
func (d *RecordDecoder) str(data []byte, i int) ([]byte, int, bool) {
	j := i + 1
	for j < len(data) {
		c := data[j]
		if c == '"' {
			return data[i+1 : j], j + 1, true
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		j++
	}
	end, ok := skipString(data, i)
	if !ok {
		return nil, 0, false
	}
	return d.unquote(data[i+1 : end-1]), end, true
}

// skipString returns the index after the JSON string at data[i] (a '"'),
// checking its grammar as encoding/json's scanner does: no control
// characters, only the JSON escapes. Any other byte, invalid UTF-8
// included, is accepted.
func skipString(data []byte, i int) (int, bool) {
	n := len(data)
	for i++; i < n; i++ {
		c := data[i]
		switch {
		case c == '"':
			return i + 1, true
		case c < 0x20:
			return 0, false
		case c == '\\':
			i++
			if i >= n {
				return 0, false
			}
			switch data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if n-i < 5 {
					return 0, false
				}
				for _, h := range data[i+1 : i+5] {
					if !isHex(h) {
						return 0, false
					}
				}
				i += 4
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// unquote decodes the body s of a JSON string whose grammar skipString
// checked, as encoding/json's unquoteBytes does. It returns s itself when
// s has no escape and is valid UTF-8, else bytes appended to d.buf. d.buf
// is grown beforehand to hold the worst case (three bytes per input byte),
// so earlier results stay valid.
func (d *RecordDecoder) unquote(s []byte) []byte {
	r := 0
	for r < len(s) {
		c := s[r]
		if c == '\\' {
			break
		}
		if c < utf8.RuneSelf {
			r++
			continue
		}
		rr, size := utf8.DecodeRune(s[r:])
		if rr == utf8.RuneError && size == 1 {
			break
		}
		r += size
	}
	if r == len(s) {
		return s
	}
	if need := len(d.buf) + 3*len(s); need > cap(d.buf) {
		// Earlier strings of this record keep pointing at the old array.
		d.buf = make([]byte, 0, max(2*cap(d.buf), need, 1024))
	}
	start := len(d.buf)
	b := append(d.buf, s[:r]...)
	for r < len(s) {
		c := s[r]
		switch {
		case c == '\\':
			r++
			switch s[r] {
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r-1:])
				r += 5
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default: // '"', '\\', '/'
				b = append(b, s[r])
			}
			r++
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	d.buf = b
	return b[start:len(b):len(b)]
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// skipValue returns the index after the JSON value at data[i] (not white
// space), nested at most to encoding/json's depth limit (the record's own
// object counts as depth 1). d.stack holds the open containers.
func (d *RecordDecoder) skipValue(data []byte, i int) (int, bool) {
	stack := d.stack[:0]
	defer func() { d.stack = stack }()
	n := len(data)
	for {
		// A value starts at i.
		i = skipWS(data, i)
		if i >= n {
			return 0, false
		}
		var ok bool
		switch c := data[i]; c {
		case '{', '[':
			if len(stack)+2 > maxDepth {
				return 0, false
			}
			i = skipWS(data, i+1)
			if i < n && data[i] == c+2 { // '}' or ']'
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i, ok = skipKey(data, i); !ok {
					return 0, false
				}
			}
			continue
		case '"':
			if i, ok = skipString(data, i); !ok {
				return 0, false
			}
		case 't':
			if !hasLiteral(data, i, "true") {
				return 0, false
			}
			i += 4
		case 'f':
			if !hasLiteral(data, i, "false") {
				return 0, false
			}
			i += 5
		case 'n':
			if !hasLiteral(data, i, "null") {
				return 0, false
			}
			i += 4
		default:
			if i, ok = scanNumber(data, i); !ok {
				return 0, false
			}
		}
		// A value ended at i: close containers until one takes another value.
		for {
			if len(stack) == 0 {
				return i, true
			}
			i = skipWS(data, i)
			if i >= n {
				return 0, false
			}
			top := stack[len(stack)-1]
			if data[i] == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if data[i] != ',' {
				return 0, false
			}
			i = skipWS(data, i+1)
			if top == '{' {
				if i, ok = skipKey(data, i); !ok {
					return 0, false
				}
			}
			break
		}
	}
}

// skipKey skips `"key" :` at data[i] and returns the index after the colon.
func skipKey(data []byte, i int) (int, bool) {
	if i >= len(data) || data[i] != '"' {
		return 0, false
	}
	i, ok := skipString(data, i)
	if !ok {
		return 0, false
	}
	i = skipWS(data, i)
	if i >= len(data) || data[i] != ':' {
		return 0, false
	}
	return i + 1, true
}
