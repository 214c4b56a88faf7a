// Package segname parses the file names of TokenFuse trace segments
// (docs/traces.md, "TokenFuse segments"). It is a leaf: the Parquet reader (package
// segment) lists directories with it, and the partition state (package
// partstate) orders rows by it without importing the reader.
package segname

import (
	"strconv"
	"strings"
)

// Parse parses a TokenFuse segment file name, either naming:
//
//   - calls-{pid:x}-{nanos:x}-{seq:08}.parquet, the current gateway's (pid
//     and nanos lowercase hex, seq decimal of at least 8 digits);
//   - calls-{seq:08}.parquet, earlier gateways' (a counter per process from
//     0), returned with pid and nanos 0.
//
// Ordering names by (nanos, seq, pid), as segment.List does, puts the earlier
// naming first, by its counter, and the current one after it by the
// time in its name: the order the gateways wrote them in, since a
// directory only gains current names once its gateway is upgraded.
func Parse(base string) (pid, nanos, seq uint64, ok bool) {
	rest, found := strings.CutPrefix(base, "calls-")
	if !found {
		return 0, 0, 0, false
	}
	rest, found = strings.CutSuffix(rest, ".parquet")
	if !found {
		return 0, 0, 0, false
	}
	isDec := func(s string) bool {
		return len(s) >= 8 && strings.Trim(s, "0123456789") == ""
	}
	parts := strings.Split(rest, "-")
	if len(parts) == 1 {
		if !isDec(parts[0]) {
			return 0, 0, 0, false
		}
		seq, err := strconv.ParseUint(parts[0], 10, 64)
		return 0, 0, seq, err == nil
	}
	if len(parts) != 3 || !isDec(parts[2]) {
		return 0, 0, 0, false
	}
	isHex := func(s string) bool {
		return s != "" && strings.Trim(s, "0123456789abcdef") == ""
	}
	if !isHex(parts[0]) || !isHex(parts[1]) {
		return 0, 0, 0, false
	}
	var err error
	if pid, err = strconv.ParseUint(parts[0], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if nanos, err = strconv.ParseUint(parts[1], 16, 64); err != nil {
		return 0, 0, 0, false
	}
	if seq, err = strconv.ParseUint(parts[2], 10, 64); err != nil {
		return 0, 0, 0, false
	}
	return pid, nanos, seq, true
}

// IsLegacy reports whether base is a segment named the earlier way,
// calls-{seq:08}.parquet.
func IsLegacy(base string) bool {
	_, _, _, ok := Parse(base)
	return ok && strings.Count(base, "-") == 1
}
