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
	type dictPage struct {
		data  []byte
		bound []uint32
	}
	perms := make([]dictPage, 8)
	for k := range perms {
		p := rng.Perm(runs)[:dict]
		ks := make([][]byte, dict)
		for i, j := range p {
			ks[i] = keys[j]
		}
		perms[k].data, perms[k].bound = pageOf(ks)
	}
	dst := make([]int32, dict)
	b.ReportAllocs()
	for k := 0; b.Loop(); k++ {
		d := perms[k%len(perms)]
		c.lookupAll(dst, d.data, d.bound)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*dict), "ns/entry")
}
