package segment

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/verdryx/verdryx/calls"
)

// BenchmarkInternDictionary maps a dictionary of 86,000 known run ids (a
// row group of the all-in-flight shape) through the cache: ns per entry.
func BenchmarkInternDictionary(b *testing.B) {
	const runs, dict = 100_000, 86_000
	c := newInternCache(calls.NewSymbols())
	keys := make([][]byte, runs)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("run-%08d", i))
		c.lookup(keys[i])
	}
	rng := rand.New(rand.NewPCG(1, 1))
	// Each dictionary's entries lie back to back, as in a dictionary page.
	perms := make([][][]byte, 8)
	for k := range perms {
		p := rng.Perm(runs)[:dict]
		var page []byte
		for _, j := range p {
			page = append(page, keys[j]...)
		}
		perms[k] = make([][]byte, dict)
		off := 0
		for i, j := range p {
			perms[k][i] = page[off : off+len(keys[j]) : off+len(keys[j])]
			off += len(keys[j])
		}
	}
	dst := make([]int32, dict)
	b.ReportAllocs()
	for k := 0; b.Loop(); k++ {
		d := perms[k%len(perms)]
		c.lookupAll(dst, dict, func(i int) []byte { return d[i] })
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dict), "ns/entry")
}
