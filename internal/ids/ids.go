// Package ids makes the ids of runs, baselines, comparisons and asks. It
// imports nothing of verdryx.
package ids

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// New returns prefix + "-" + now as a UTC timestamp to the second + "-" +
// 8 random hex digits ("run-20261207T131831Z-6fce2345"): ids of one prefix
// sort by creation time to the second, and two made in the same second
// differ but for a 1 in 2^32 chance. It is safe for concurrent use.
func New(prefix string, now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return fmt.Sprintf("%s-%s-%s", prefix, now.UTC().Format("20060102T150405Z"), hex.EncodeToString(b[:]))
}
