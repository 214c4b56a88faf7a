package segment

import (
	"bytes"
	"hash/maphash"
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
	seed  maphash.Seed
	slots []cacheSlot // open addressing, linear probing; len a power of two
	used  int
	arena []byte // the keys longer than inlineKey, back to back
	hash  []uint64
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

func newInternCache(table *calls.Symbols) *internCache {
	return &internCache{table: table, seed: maphash.MakeSeed(), slots: make([]cacheSlot, 1024)}
}

// sum hashes b; the high 32 bits are never 0 (they tag a full slot).
func (c *internCache) sum(b []byte) uint64 {
	var h uint64
	if c.weakHash != nil {
		h = c.weakHash(b)
	} else {
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
	id := c.table.Intern(b)
	c.insert(b, h, id)
	return id
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

// lookupAll writes the id of each of n keys (key(i) returns key i) into
// dst[:n]. Hashing every key first lets the probes run back to back.
//
// The first dictionary an empty cache meets, such as the first run id
// dictionary of an interleaved directory, brings only new keys, and later
// row groups bring more: room is made at once for it and a quarter more
// in the cache and half more in the table, rather than by doubling step by
// step. (The table's 8-byte slots cost little, and it fills to 3/4, not
// 7/8: with a quarter more, a directory with every run in flight, 1.3
// times its first dictionary, doubled the table near the end.)
func (c *internCache) lookupAll(dst []int32, n int, key func(int) []byte) {
	if c.used == 0 {
		c.reserve(n+n/4, n+n/2)
	}
	if cap(c.hash) < n {
		c.hash = make([]uint64, n)
	}
	hs := c.hash[:n]
	for i := range hs {
		hs[i] = c.sum(key(i))
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
		dst[i] = c.find(key(i), h)
	}
}
