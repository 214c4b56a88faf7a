package segment

import (
	"bytes"
	"encoding/binary"
	"github.com/verdryx/verdryx/internal/hugepage"
	"hash/maphash"
	"math/bits"
	"math/rand/v2"
	"unsafe"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/internal/prefetch"
)

// internCache maps string bytes to the ids of one calls.Symbols table, for
// mapping whole dictionaries at once. It is a read-through cache in front of
// the table: an id it holds is the table's id for the same bytes (ids never
// change), and a miss interns into the table and remembers the answer.
//
// Why not the table's own map: a row group's dictionary of an interleaved
// directory holds tens of thousands of run ids, nearly every one already
// interned from an earlier row group, so mapping dictionaries is a stream
// of lookups that miss the CPU caches. This table keeps a lookup to one
// 16-byte slot plus the key's bytes in one contiguous arena, and
// lookupAll hashes a whole dictionary before probing, so the probes of
// neighbouring entries overlap in memory. Not safe for concurrent use.
type internCache struct {
	table *calls.Symbols
	seed  maphash.Seed // keys longer than inlineKey
	k0    uint64       // keys of at most inlineKey bytes (shortHash)
	k1    uint64
	slots []cacheSlot // open addressing, linear probing; len a power of two
	used  int
	arena []byte // the keys longer than inlineKey, back to back
	hash  []uint64
	huge  bool // ask for huge pages for the slots and hashes (Scanner.UseHugePages)
	// weakHash, set by tests, replaces the hash so that keys collide.
	weakHash func([]byte) uint64
}

// cacheSlot is 32 bytes, half a cache line: the high half of the key's
// hash (0 marks an empty slot), the id, the key's length and its first
// inlineKey bytes, and where the whole key is in the arena. A key of at
// most inlineKey bytes (run-00012345) is compared in the slot, without
// touching the arena: one cache miss per lookup instead of two.
type cacheSlot struct {
	tag uint32
	id  int32
	n   uint32
	off uint32
	key [inlineKey]byte
}

// slotShift is log2 of the size of a cacheSlot (the constant below does
// not compile otherwise).
const slotShift = 5

const _ = -uint(unsafe.Sizeof(cacheSlot{}) ^ 1<<slotShift)

const (
	inlineKey    = 16
	maxCachedKey = 1<<32 - 1
)

// newInternCache returns a cache in front of table, holding "" (id 0).
func newInternCache(table *calls.Symbols) *internCache { return newHashedCache(table, nil) }

// newHashedCache is newInternCache with weakHash set (tests).
func newHashedCache(table *calls.Symbols, weakHash func([]byte) uint64) *internCache {
	c := &internCache{table: table, seed: maphash.MakeSeed(), k0: rand.Uint64(), k1: rand.Uint64(),
		slots: make([]cacheSlot, 1024), weakHash: weakHash}
	c.lookup(nil)
	return c
}

// sum hashes b; the high 32 bits are never 0 (they tag a full slot).
func (c *internCache) sum(b []byte) uint64 {
	var h uint64
	switch {
	case c.weakHash != nil:
		h = c.weakHash(b)
	case len(b) <= inlineKey:
		h = shortHash(c.k0, c.k1, b)
	default:
		h = maphash.Bytes(c.seed, b)
	}
	if h>>32 == 0 {
		h |= 1 << 32
	}
	return h
}

// lookup returns the id of b, interning it if new.
func (c *internCache) lookup(b []byte) int32 {
	return c.find(b, c.sum(b))
}

func (c *internCache) find(b []byte, h uint64) int32 {
	mask := uint64(len(c.slots) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		s := &c.slots[i]
		if s.tag == 0 {
			break
		}
		if s.tag == tag && int(s.n) == len(b) {
			if len(b) <= inlineKey {
				if string(s.key[:len(b)]) == string(b) {
					return s.id
				}
			} else if string(s.key[:]) == string(b[:inlineKey]) &&
				bytes.Equal(c.arena[s.off:int(s.off)+len(b)], b) {
				return s.id
			}
		}
	}
	// A miss. When the cache holds as many keys as the table has ids, it
	// holds every key of the table (its keys are distinct, each with the
	// table's id for it), so b is new to the table too: it is added
	// without a second lookup, and the table indexes it only if it is
	// ever looked up there.
	var id int32
	if c.used == c.table.Len() {
		id = c.table.AppendNew(b)
	} else {
		id = c.table.Intern(b)
	}
	c.insert(b, h, id)
	return id
}

// shortHash hashes a key of at most 16 bytes with the random keys k0 and
// k1: the key's first and last 8 bytes (4, or its first, middle and last
// byte, when shorter; together they are the whole key) and its length are
// folded by two 64x64->128-bit multiplications, as wyhash and the Go
// runtime's fallback hash do. A few times cheaper than hash/maphash for
// the keys of a run-id dictionary; keyed per cache, so inputs cannot be
// chosen to collide.
func shortHash(k0, k1 uint64, b []byte) uint64 {
	n := len(b)
	var a, z uint64
	switch {
	case n >= 8:
		a, z = binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[n-8:])
	case n >= 4:
		a, z = uint64(binary.LittleEndian.Uint32(b)), uint64(binary.LittleEndian.Uint32(b[n-4:]))
	case n > 0:
		a = uint64(b[0])<<16 | uint64(b[n>>1])<<8 | uint64(b[n-1])
	}
	hi, lo := bits.Mul64(a^k0, z^k1)
	hi, lo = bits.Mul64(hi^lo^uint64(n), k1^0xe7037ed1a0b428db)
	return hi ^ lo
}

func (c *internCache) insert(b []byte, h uint64, id int32) {
	if uint64(len(c.arena))+uint64(len(b)) > maxCachedKey {
		return // too much to remember: the table still answers
	}
	if 8*(c.used+1) > 7*len(c.slots) {
		c.grow()
	}
	s := cacheSlot{tag: uint32(h >> 32), id: id, n: uint32(len(b))}
	copy(s.key[:], b)
	if len(b) > inlineKey {
		s.off = uint32(len(c.arena))
		c.arena = append(c.arena, b...)
	}
	c.place(s, h)
	c.used++
}

func (c *internCache) place(s cacheSlot, h uint64) {
	mask := uint64(len(c.slots) - 1)
	i := h & mask
	for c.slots[i].tag != 0 {
		i = (i + 1) & mask
	}
	c.slots[i] = s
}

func (c *internCache) grow() { c.resize(2 * len(c.slots)) }

// reserve makes room for n more keys in the cache and tableN more in its
// table, with one resize of each instead of a doubling at a time.
func (c *internCache) reserve(n, tableN int) {
	want, size := c.used+n, len(c.slots)
	for 8*want > 7*size {
		size *= 2
	}
	if size > len(c.slots) {
		c.resize(size)
	}
	c.table.Reserve(tableN)
}

func (c *internCache) resize(n int) {
	old := c.slots
	c.slots = make([]cacheSlot, n)
	if c.huge {
		hugepage.Advise(c.slots)
	}
	for _, s := range old {
		if s.tag != 0 {
			key := s.key[:min(int(s.n), inlineKey)]
			if s.n > inlineKey {
				key = c.arena[s.off : s.off+s.n]
			}
			c.place(s, c.sum(key))
		}
	}
}

// lookupAll writes the id of each key into dst[:len(bound)/2]: key i is
// data[bound[2i]:bound[2i+1]] (the bounds must lie in data). Hashing every
// key first lets the probes run back to back.
//
// The first dictionary an empty cache meets, such as the first run id
// dictionary of an interleaved directory, brings only new keys, and later
// row groups bring more: room is made at once for it and a quarter more
// in the cache and half more in the table, rather than by doubling step by
// step. (The table's 8-byte slots cost little, and it fills to 3/4, not
// 7/8: with a quarter more, a directory with every run in flight, 1.3
// times its first dictionary, doubled the table near the end.)
func (c *internCache) lookupAll(dst []int32, data []byte, bound []uint32) {
	n := len(bound) / 2
	if c.used <= 1 { // "" only
		c.reserve(n+n/4, n+n/2)
	}
	if cap(c.hash) < n {
		c.hash = make([]uint64, n, n+n/8)
		if c.huge {
			hugepage.Advise(c.hash)
		}
	}
	hs := c.hash[:n]
	for i := range hs {
		hs[i] = c.sum(data[bound[2*i]:bound[2*i+1]])
	}
	// Each probe misses the CPU caches when the table is large: hint the
	// home slots of the next chunk's keys while probing this chunk's, so
	// the misses overlap.
	const ahead = 64
	base, mask := unsafe.Pointer(unsafe.SliceData(c.slots)), uint64(len(c.slots)-1)
	prefetch.Hashed(base, hs[:min(n, ahead)], mask, slotShift)
	for i, h := range hs {
		if i%ahead == 0 && i+ahead < n {
			prefetch.Hashed(base, hs[i+ahead:min(n, i+2*ahead)], mask, slotShift)
		}
		dst[i] = c.find(data[bound[2*i]:bound[2*i+1]], h)
	}
}
