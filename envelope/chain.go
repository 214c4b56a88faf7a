package envelope

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// LineHash returns the chain hash of one written line (the hash its
// successor must carry as prev_hash) and the line's own prev_hash ("" when
// absent). The line must be a JSON object; its members are hashed as
// written, unknown ones included.
func LineHash(line []byte) (hash, prevHash string, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(line, &members); err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if members == nil {
		return "", "", fmt.Errorf("%w: not a JSON object", ErrMalformed)
	}
	if raw, ok := members["prev_hash"]; ok {
		if err := decodeString(raw, &prevHash); err != nil {
			return "", "", &FieldError{Field: "prev_hash", Value: truncate(string(raw)), Reason: err.Error()}
		}
		delete(members, "prev_hash")
	}
	// encoding/json writes map keys sorted and RawMessage compacted; the
	// canonicalizer then fixes key order (UTF-16), numbers and escaping.
	stripped, err := json.Marshal(members)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	c, err := CanonicalizeJSON(stripped)
	if err != nil {
		return "", "", fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return hashBytes(c), prevHash, nil
}

// Link classifies one line of a chain.
type Link int

// Link kinds, as agent-conform -chain counts them.
const (
	LinkBlank        Link = iota // skipped
	LinkHead                     // no prev_hash: starts a chain
	LinkChained                  // prev_hash equals the previous well-formed event's hash
	LinkUnverifiable             // follows a malformed line
	LinkBreak                    // anything else
	LinkMalformed                // not a JSON object
)

func (l Link) String() string {
	switch l {
	case LinkBlank:
		return "blank"
	case LinkHead:
		return "head"
	case LinkChained:
		return "chained"
	case LinkUnverifiable:
		return "unverifiable"
	case LinkBreak:
		return "break"
	case LinkMalformed:
		return "malformed"
	}
	return fmt.Sprintf("Link(%d)", int(l))
}

// Checker verifies a chain incrementally, one line at a time, with the rules
// of agent-conform -chain. The zero value is ready to use. It is not safe
// for concurrent use.
type Checker struct {
	lastHash      string
	lastMalformed bool
}

// Check classifies line and advances the chain. For a break it returns the
// expected and found prev_hash; for a malformed line, the parse error.
func (c *Checker) Check(line []byte) (link Link, expected, found string, err error) {
	if len(bytes.TrimSpace(line)) == 0 {
		return LinkBlank, "", "", nil
	}
	hash, prev, err := LineHash(line)
	if err != nil {
		c.lastMalformed = true
		c.lastHash = ""
		return LinkMalformed, "", "", err
	}
	switch {
	case prev == "":
		// A line without prev_hash is a head (an explicitly empty one is
		// not a valid hash and is treated as absent by the chain rules).
		link = LinkHead
		if raw := prevHashMember(line); raw {
			link = LinkBreak
			expected, found = c.lastHash, prev
		}
	case c.lastMalformed:
		link = LinkUnverifiable
	case prev == c.lastHash:
		link = LinkChained
	default:
		link = LinkBreak
		expected, found = c.lastHash, prev
	}
	c.lastHash = hash
	c.lastMalformed = false
	return link, expected, found, nil
}

// prevHashMember reports whether the line carries a prev_hash member at all.
func prevHashMember(line []byte) bool {
	var probe struct {
		PrevHash *string `json:"prev_hash"`
	}
	return json.Unmarshal(line, &probe) == nil && probe.PrevHash != nil
}

// Break is one chain break found by verification.
type Break struct {
	Line     int    // 1-based line number
	Expected string // hash of the previous well-formed event ("" if none)
	Found    string // the line's prev_hash
}

// Problem is a line that is not a valid envelope.
type Problem struct {
	Line int
	Err  error
}

// Report is the verification result of one chain.
type Report struct {
	Events       int // well-formed lines
	Heads        int
	Chained      int
	Unverifiable int
	Breaks       []Break
	Malformed    []Problem // lines that are not JSON objects
	Invalid      []Problem // well-formed lines whose on_behalf_of is invalid
}

// OK reports whether the chain verifies: no breaks, no malformed lines and
// no invalid on_behalf_of. agent-conform fails only on breaks; verdryx also
// fails a file with an unreadable line, since what follows it cannot be
// verified.
func (r Report) OK() bool { return len(r.Breaks) == 0 && len(r.Malformed) == 0 && len(r.Invalid) == 0 }

// maxLineBytes bounds one line read by Verify (16 MiB).
const maxLineBytes = 16 << 20

// Verify reads an NDJSON chain from r. It returns an error only when r
// cannot be read or a line is longer than 16 MiB; chain problems are in
// the report.
func Verify(r io.Reader) (Report, error) {
	var rep Report
	var c Checker
	br := bufio.NewReaderSize(r, 64<<10)
	for lineNo := 1; ; lineNo++ {
		line, err := readLine(br)
		if len(line) > 0 {
			link, expected, found, cerr := c.Check(line)
			switch link {
			case LinkHead:
				rep.Heads++
			case LinkChained:
				rep.Chained++
			case LinkUnverifiable:
				rep.Unverifiable++
			case LinkBreak:
				rep.Breaks = append(rep.Breaks, Break{Line: lineNo, Expected: expected, Found: found})
			case LinkMalformed:
				rep.Malformed = append(rep.Malformed, Problem{Line: lineNo, Err: cerr})
			}
			if link != LinkBlank && link != LinkMalformed {
				rep.Events++
				if oboErr := checkOnBehalfOf(line); oboErr != nil {
					rep.Invalid = append(rep.Invalid, Problem{Line: lineNo, Err: oboErr})
				}
			}
		}
		if err == io.EOF {
			return rep, nil
		}
		if err != nil {
			return rep, fmt.Errorf("line %d: %w", lineNo, err)
		}
	}
}

// errLineTooLong reports a line over maxLineBytes.
var errLineTooLong = errors.New("envelope: line longer than 16 MiB")

// readLine returns the next line without its newline. At EOF it returns the
// final unterminated line (if any) with io.EOF.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLineBytes {
			return nil, errLineTooLong
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		if err != nil {
			return line, err
		}
		return line[:len(line)-1], nil
	}
}

func checkOnBehalfOf(line []byte) error {
	var probe struct {
		OnBehalfOf json.RawMessage `json:"on_behalf_of"`
	}
	if err := json.Unmarshal(line, &probe); err != nil || probe.OnBehalfOf == nil {
		return nil
	}
	var obo []string
	if err := json.Unmarshal(probe.OnBehalfOf, &obo); err != nil {
		return &FieldError{Field: "on_behalf_of", Value: truncate(string(probe.OnBehalfOf)), Reason: "want an array of strings"}
	}
	return validateOnBehalfOf(obo)
}

// VerifyFile verifies the chain in the file at path.
func VerifyFile(path string) (Report, error) {
	f, err := os.Open(path)
	if err != nil {
		return Report{}, err
	}
	defer f.Close()
	rep, err := Verify(f)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", path, err)
	}
	return rep, nil
}
