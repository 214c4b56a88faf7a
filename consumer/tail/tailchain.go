package tail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/verdryx/verdryx/envelope"
)

// LineKind says what a tailed line holds.
type LineKind int

// Line kinds.
const (
	KindBlank     LineKind = iota // empty or white space only
	KindEvent                     // an agent-event envelope (schema taipanbox.dev/agent-event/...)
	KindRecord                    // a call or outcome record (run_id, outcome or cost fields)
	KindOther                     // a JSON object that is neither
	KindMalformed                 // not a JSON object
	KindOversize                  // skipped for exceeding the tailer's MaxLineBytes
)

func (k LineKind) String() string {
	switch k {
	case KindBlank:
		return "blank"
	case KindEvent:
		return "event"
	case KindRecord:
		return "record"
	case KindOther:
		return "other"
	case KindMalformed:
		return "malformed"
	case KindOversize:
		return "oversize"
	}
	return fmt.Sprintf("LineKind(%d)", int(k))
}

// eventSchemaPrefix marks an agent-event envelope of any version.
const eventSchemaPrefix = "taipanbox.dev/agent-event/"

// Classified is the verdict on one tailed line.
type Classified struct {
	Kind LineKind
	// Event is the decoded envelope (KindEvent), as far as it could be
	// decoded.
	Event envelope.Event
	// Link is the chain verdict of an event; Expected and Found are set for
	// a break. Link is envelope.LinkUnverifiable for the first event after a
	// resume whose predecessor could not be read.
	Link            envelope.Link
	Expected, Found string
	// Err is why an event is invalid (a *envelope.FieldError) or why a line
	// is malformed; nil otherwise.
	Err error
	// Record is the raw object of a KindRecord line (a copy: it outlives the
	// Line).
	Record json.RawMessage
}

// LineChecker classifies tailed lines and checks the prev_hash chain of the
// events among them incrementally, as they arrive. One file is one chain:
// the chain restarts when the file changes (rotation) or is read again from
// byte 0 (truncation). As in agent-conform -chain (and as the envelope
// writer continues a chain), every well-formed line is a link, records and
// other objects included; a malformed or oversize line makes the next event
// unverifiable. A non-event line is hashed only when an event follows it.
//
// When the first line it sees (in a file) does not start at byte 0, as after
// a resume from a saved offset, the checker reads the line before it from
// the file to seed the chain; if it cannot, the first event is reported
// unverifiable rather than as a break.
//
// The zero value is ready to use. A LineChecker is not safe for concurrent
// use.
type LineChecker struct {
	chk     envelope.Checker
	file    FileID
	started bool
	// unseeded: the chain's predecessor is unknown until the next event.
	unseeded bool
	// pending is the last well-formed non-event line, not yet hashed into
	// the chain (only an event after it needs its hash).
	pending []byte
}

// Check classifies ln and, for an event, validates it and advances the
// chain.
func (c *LineChecker) Check(ln Line) Classified {
	if !c.started || ln.File != c.file || ln.Offset == 0 {
		c.chk = envelope.Checker{}
		c.file = ln.File
		c.started = true
		c.unseeded = false
		c.pending = nil
		if ln.Offset > 0 {
			c.seed(ln)
		}
	}
	if ln.Oversize > 0 {
		// Its content is unknown: what follows cannot be verified.
		c.pending = nil
		c.chk.Check([]byte("\x00"))
		return Classified{Kind: KindOversize, Err: fmt.Errorf("line of %d bytes skipped", ln.Oversize)}
	}
	if len(bytes.TrimSpace(ln.Bytes)) == 0 {
		return Classified{Kind: KindBlank}
	}
	var p lineProbe
	if err := p.decode(ln.Bytes); err != nil {
		c.pending = nil
		c.chk.Check(ln.Bytes)
		return Classified{Kind: KindMalformed, Err: err}
	}
	switch {
	case p.isEvent():
		return c.event(ln.Bytes)
	case p.isRecord():
		c.pending = bytes.Clone(ln.Bytes)
		return Classified{Kind: KindRecord, Record: c.pending}
	}
	c.pending = append(c.pending[:0:0], ln.Bytes...)
	return Classified{Kind: KindOther}
}

// lineProbe decodes only the members that classify a line.
type lineProbe struct {
	Schema       json.RawMessage `json:"schema"`
	RunID        json.RawMessage `json:"run_id"`
	Outcome      json.RawMessage `json:"outcome"`
	CostMicroUSD json.RawMessage `json:"cost_microusd"`
	CostUSD      json.RawMessage `json:"cost_usd"`
}

// decode fails unless b is one JSON object.
func (p *lineProbe) decode(b []byte) error {
	if t := bytes.TrimSpace(b); len(t) == 0 || t[0] != '{' {
		return errors.New("not a JSON object")
	}
	return json.Unmarshal(b, p)
}

// isEvent: the schema names an agent-event envelope (any version; versions
// other than v0.1 and v0.2 are then reported invalid by validation).
func (p *lineProbe) isEvent() bool {
	var schema string
	return p.Schema != nil && json.Unmarshal(p.Schema, &schema) == nil && strings.HasPrefix(schema, eventSchemaPrefix)
}

// isRecord: one of the members of a call or outcome record is present.
func (p *lineProbe) isRecord() bool {
	return p.RunID != nil || p.Outcome != nil || p.CostMicroUSD != nil || p.CostUSD != nil
}

func (c *LineChecker) event(b []byte) Classified {
	out := Classified{Kind: KindEvent}
	if err := json.Unmarshal(b, &out.Event); err != nil {
		out.Err = err
	} else {
		out.Err = out.Event.Validate()
	}
	if c.pending != nil {
		c.chk.Check(c.pending)
		c.pending = nil
	}
	link, expected, found, err := c.chk.Check(b)
	if err != nil && out.Err == nil {
		out.Err = err
	}
	out.Link, out.Expected, out.Found = link, expected, found
	if c.unseeded {
		c.unseeded = false
		if link == envelope.LinkBreak && expected == "" {
			out.Link, out.Expected, out.Found = envelope.LinkUnverifiable, "", ""
		}
	}
	return out
}

// seed feeds the checker the line before ln, read back from the file.
func (c *LineChecker) seed(ln Line) {
	prev, err := previousLine(ln.Path, ln.File, ln.Offset)
	if err != nil || prev == nil {
		c.unseeded = true
		return
	}
	var p lineProbe
	if p.decode(prev) == nil && !p.isEvent() {
		c.pending = bytes.Clone(prev)
		return
	}
	c.chk.Check(prev)
}

// maxSeedBytes bounds how far back previousLine reads.
const maxSeedBytes = 1 << 20

// previousLine returns the line that ends just before offset in the file at
// path, provided the file there is still id.
func previousLine(path string, id FileID, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if got, ok := fileID(fi); !ok || got != id {
		return nil, errors.New("file changed")
	}
	start := max(0, offset-maxSeedBytes-1)
	buf := make([]byte, offset-start)
	if _, err := f.ReadAt(buf, start); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	if len(buf) == 0 || buf[len(buf)-1] != '\n' {
		return nil, errors.New("offset is not at a line start")
	}
	buf = buf[:len(buf)-1]
	i := bytes.LastIndexByte(buf, '\n')
	if i < 0 && start > 0 {
		return nil, errors.New("previous line too long")
	}
	return buf[i+1:], nil
}
