package rag

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// bm25 is the BM25 ranking of a corpus's search texts (BM25K1, BM25B, IDF
// log(1 + (N - df + 0.5)/(df + 0.5))) over the terms of termsOf, read from
// its encoding (bm25Magic): the one a generation stores (bm25File) and the
// one an in-memory pipeline builds (newBM25). Only the postings of a
// question's terms are decoded, so opening one costs a read of the file.
// It is read-only, so safe for concurrent use.
type bm25 struct {
	n     int
	avg   float64
	lens  []byte // n little-endian uint32 term counts
	toff  []byte // t+1 little-endian uint32 offsets into terms
	terms []byte // the terms, sorted, concatenated
	dfs   []byte // t little-endian uint32 document frequencies
	poff  []byte // t+1 little-endian uint64 offsets into post
	post  []byte // per term, per row holding it: uvarint row delta, uvarint count
}

// bm25Magic opens the encoding: then uint32 n, float64 avg, n uint32
// lengths, uint32 t, t+1 uint32 term offsets, the term bytes, t uint32
// document frequencies, t+1 uint64 posting offsets and the postings, all
// little-endian.
const bm25Magic = "VXBM25\x01\n"

// newBM25 counts the terms of texts (one row each) and returns their
// encoded statistics, decoded.
func newBM25(texts []string) *bm25 {
	b, err := decodeBM25(encodeBM25(texts))
	if err != nil {
		panic("rag: bm25 encoding does not decode: " + err.Error()) // a bug, not input
	}
	return b
}

// encodeBM25 returns the BM25 statistics of texts in the bm25Magic
// encoding (bm25Acc, as a generation's builder writes them).
func encodeBM25(texts []string) []byte {
	a := newBM25Acc()
	for _, t := range texts {
		a.add(t)
	}
	var buf bytes.Buffer
	_ = a.encode(&buf) // a buffer never fails to write
	return buf.Bytes()
}

// errBM25 reports statistics that do not decode.
var errBM25 = errors.New("bm25 statistics do not decode")

// decodeBM25 checks the layout of b (magic, sizes, offsets in order) and
// returns its statistics; the postings are checked as they are read.
func decodeBM25(b []byte) (*bm25, error) {
	if err := checkMagic(b, bm25Magic); err != nil {
		return nil, fmt.Errorf("%w: %w", errBM25, err)
	}
	r := reader{b: b}
	r.next(len(bm25Magic))
	s := &bm25{}
	s.n = int(r.u32())
	s.avg = math.Float64frombits(r.u64())
	s.lens = r.next(4 * s.n)
	t := int(r.u32())
	s.toff = r.next(4 * (t + 1))
	if r.err != nil {
		return nil, r.err
	}
	s.terms = r.next(int(binary.LittleEndian.Uint32(s.toff[4*t:])))
	s.dfs = r.next(4 * t)
	s.poff = r.next(8 * (t + 1))
	if r.err != nil {
		return nil, r.err
	}
	s.post = r.next(len(b) - r.off)
	for i := range t {
		if s.termOff(i) > s.termOff(i+1) || s.postOff(i) > s.postOff(i+1) {
			return nil, fmt.Errorf("%w: offsets of term %d out of order", errBM25, i)
		}
	}
	if s.postOff(t) != uint64(len(s.post)) || s.postOff(0) != 0 || s.termOff(0) != 0 {
		return nil, fmt.Errorf("%w: offsets do not span the data", errBM25)
	}
	return s, nil
}

// reader reads b front to back, remembering the first overrun.
type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) next(n int) []byte {
	if r.err != nil || n < 0 || n > len(r.b)-r.off {
		if r.err == nil {
			r.err = fmt.Errorf("%w: truncated at byte %d", errBM25, r.off)
		}
		return make([]byte, max(n, 0))
	}
	out := r.b[r.off : r.off+n]
	r.off += n
	return out
}

// checkMagic returns nil when b starts with magic (a format's name and
// version), else an error naming the format b starts with and magic.
func checkMagic(b []byte, magic string) error {
	if string(b[:min(len(b), len(magic))]) != magic {
		return fmt.Errorf("format %q, this build reads %q", b[:min(len(b), len(magic))], magic)
	}
	return nil
}

func (r *reader) u32() uint32 { return binary.LittleEndian.Uint32(r.next(4)) }
func (r *reader) u64() uint64 { return binary.LittleEndian.Uint64(r.next(8)) }

func (s *bm25) count() int             { return len(s.dfs) / 4 }
func (s *bm25) termOff(i int) uint32   { return binary.LittleEndian.Uint32(s.toff[4*i:]) }
func (s *bm25) postOff(i int) uint64   { return binary.LittleEndian.Uint64(s.poff[8*i:]) }
func (s *bm25) df(i int) int           { return int(binary.LittleEndian.Uint32(s.dfs[4*i:])) }
func (s *bm25) rowLen(r int) float64   { return float64(binary.LittleEndian.Uint32(s.lens[4*r:])) }
func (s *bm25) term(i int) string      { return string(s.terms[s.termOff(i):s.termOff(i+1)]) }
func (s *bm25) termBytes(i int) []byte { return s.terms[s.termOff(i):s.termOff(i+1)] }

// find returns the first term index not below w, and whether it is w.
func (s *bm25) find(w string) (int, bool) {
	i := sort.Search(s.count(), func(i int) bool { return string(s.termBytes(i)) >= w })
	return i, i < s.count() && string(s.termBytes(i)) == w
}

// postings calls f with each row holding term i and the term's count
// there, rows ascending. It stops at the first posting that does not
// decode or names a row out of range, and reports it.
func (s *bm25) postings(i int, f func(row int, tf float64)) error {
	p := s.post[s.postOff(i):s.postOff(i+1)]
	row := uint64(0)
	for len(p) > 0 {
		d, n := binary.Uvarint(p)
		if n <= 0 {
			return fmt.Errorf("%w: postings of %q", errBM25, s.term(i))
		}
		p = p[n:]
		tf, m := binary.Uvarint(p)
		if m <= 0 {
			return fmt.Errorf("%w: postings of %q", errBM25, s.term(i))
		}
		p = p[m:]
		row += d
		if row >= uint64(s.n) {
			return fmt.Errorf("%w: postings of %q name row %d of %d", errBM25, s.term(i), row, s.n)
		}
		f(int(row), float64(tf))
	}
	return nil
}

// maxMatchDF is the most rows any term matching t (termMatch: equal, or
// one a prefix of the other of at least 4 bytes) is in: t's own count
// when the corpus holds t.
func (s *bm25) maxMatchDF(t string) int {
	i, ok := s.find(t)
	if ok {
		return s.df(i)
	}
	best := 0
	if len(t) >= 4 { // terms t is a prefix of follow it in order
		for j := i; j < s.count() && strings.HasPrefix(string(s.termBytes(j)), t); j++ {
			best = max(best, s.df(j))
		}
	}
	for l := 4; l < len(t); l++ { // terms that are a prefix of t
		if j, ok := s.find(t[:l]); ok {
			best = max(best, s.df(j))
		}
	}
	return best
}

// rankErr is rank, also reporting postings that do not decode (their
// rows so far are kept).
func (s *bm25) rankErr(query string, allowed map[int]bool, depth int) ([]int, error) {
	n := float64(s.n)
	scores := map[int]float64{}
	seen := map[string]bool{}
	var firstErr error
	for _, w := range termsOf(query) {
		if seen[w] {
			continue
		}
		seen[w] = true
		i, ok := s.find(w)
		if !ok {
			continue
		}
		df := float64(s.df(i))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		err := s.postings(i, func(row int, tf float64) {
			if allowed != nil && !allowed[row] {
				return
			}
			norm := 1.0
			if s.avg > 0 {
				norm = 1 - BM25B + BM25B*s.rowLen(row)/s.avg
			}
			scores[row] += idf * tf * (BM25K1 + 1) / (tf + BM25K1*norm)
		})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	rows := make([]int, 0, len(scores))
	for r := range scores {
		rows = append(rows, r)
	}
	slices.SortFunc(rows, func(x, y int) int {
		if scores[x] != scores[y] {
			if scores[x] > scores[y] {
				return -1
			}
			return 1
		}
		return x - y
	})
	return rows[:min(depth, len(rows))], firstErr
}
