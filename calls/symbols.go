package calls

import (
	"github.com/verdryx/verdryx/internal/hugepage"
	"hash/maphash"
	"unsafe"
)

// Symbols interns strings to dense int32 ids. Id 0 is always "", so a zeroed
// id column reads as empty strings. A Symbols is not safe for concurrent use.
//
// The index is an open-addressing table of (hash tag, id) pairs, 8 bytes
// a slot, and the bytes of strings interned from a []byte are copied into
// shared chunks rather than allocated one by one: a directory replay
// interns hundreds of thousands of run ids, and a Go map of strings costs
// an allocation, growth rehashing and GC scanning per entry.
//
// Strings added with AppendNew are indexed late, by the first Intern,
// InternString or Lookup after them: a caller that keeps an index of its
// own (package segment's intern cache) fills a table no one may ever look
// up by string, and then pays for no second index.
type Symbols struct {
	names   []string
	seed    maphash.Seed
	slots   []symSlot // len a power of two; id -1 marks an empty slot
	indexed int       // names[:indexed] are in slots
	room    int       // strings the index is to hold without growing (Reserve)
	arena   []byte    // the current chunk strings from Intern are copied into
	huge    bool      // ask for huge pages for the index and names (UseHugePages)
}

// UseHugePages makes the table ask for transparent huge pages for its
// index and names when it grows from now on (see package segment's
// Scanner.UseHugePages for when to).
func (s *Symbols) UseHugePages() { s.huge = true }

type symSlot struct {
	tag uint32 // high half of the string's hash
	id  int32
}

// symbolChunk is the size of the chunks Intern copies strings into.
const symbolChunk = 64 << 10

// NewSymbols returns a table holding only "" (id 0).
func NewSymbols() *Symbols {
	s := &Symbols{seed: maphash.MakeSeed()}
	s.resize(64)
	s.insert("", maphash.String(s.seed, ""))
	return s
}

// Reserve makes room for n more strings, so that interning up to n new ones
// grows nothing: the index is resized once, rather than doubled step by
// step while they arrive (when it is next used: see AppendNew).
func (s *Symbols) Reserve(n int) {
	want := len(s.names) + n
	s.room = max(s.room, want)
	if cap(s.names) < want {
		names := make([]string, 0, want)
		if s.huge {
			hugepage.Advise(names)
		}
		s.names = append(names, s.names...)
	}
}

// AppendNew adds b, which the caller knows is not interned, without looking
// it up, and returns its new id. It does not retain b. For a caller that
// indexes every string of the table itself (package segment's intern
// cache, when it holds them all): b must not be interned already, or it
// gets a second id.
func (s *Symbols) AppendNew(b []byte) int32 {
	id := int32(len(s.names))
	s.names = append(s.names, s.copyString(b))
	return id
}

// Intern returns the id of b, adding it if new. It does not retain b.
func (s *Symbols) Intern(b []byte) int32 {
	s.index()
	h := maphash.Bytes(s.seed, b)
	if id, ok := s.find(unsafe.String(unsafe.SliceData(b), len(b)), h); ok {
		return id
	}
	return s.insert(s.copyString(b), h)
}

// InternString returns the id of v, adding it if new.
func (s *Symbols) InternString(v string) int32 {
	s.index()
	h := maphash.String(s.seed, v)
	if id, ok := s.find(v, h); ok {
		return id
	}
	return s.insert(v, h)
}

// Lookup returns the id of v and whether it is interned.
func (s *Symbols) Lookup(v string) (int32, bool) {
	s.index()
	return s.find(v, maphash.String(s.seed, v))
}

// Name returns the string of id. It panics on an id the table never issued.
func (s *Symbols) Name(id int32) string { return s.names[id] }

// Len returns the number of interned strings, "" included.
func (s *Symbols) Len() int { return len(s.names) }

// index brings the index up to date: the strings added by AppendNew are
// put in, and the room Reserve asked for is made.
func (s *Symbols) index() {
	if s.indexed == len(s.names) && 4*s.room <= 3*len(s.slots) {
		return
	}
	want := max(len(s.names), s.room)
	if 4*want > 3*len(s.slots) {
		size := len(s.slots)
		for 4*want > 3*size {
			size *= 2
		}
		s.resize(size)
		return
	}
	for ; s.indexed < len(s.names); s.indexed++ {
		v := s.names[s.indexed]
		h := maphash.String(s.seed, v)
		s.place(symSlot{tag: uint32(h >> 32), id: int32(s.indexed)}, h)
	}
}

// find returns the id of v, whose hash is h. v may alias a caller's bytes:
// it is only compared.
func (s *Symbols) find(v string, h uint64) (int32, bool) {
	mask := uint64(len(s.slots) - 1)
	tag := uint32(h >> 32)
	for i := h & mask; ; i = (i + 1) & mask {
		sl := s.slots[i]
		if sl.id < 0 {
			return 0, false
		}
		if sl.tag == tag && s.names[sl.id] == v {
			return sl.id, true
		}
	}
}

// insert adds v (not interned, hash h) and returns its id. The index
// must be up to date.
func (s *Symbols) insert(v string, h uint64) int32 {
	if 4*(len(s.names)+1) > 3*len(s.slots) {
		s.resize(2 * len(s.slots))
	}
	id := int32(len(s.names))
	s.names = append(s.names, v)
	s.place(symSlot{tag: uint32(h >> 32), id: id}, h)
	s.indexed++
	return id
}

func (s *Symbols) place(sl symSlot, h uint64) {
	mask := uint64(len(s.slots) - 1)
	i := h & mask
	for s.slots[i].id >= 0 {
		i = (i + 1) & mask
	}
	s.slots[i] = sl
}

// resize rebuilds the index with n slots, every string in it.
func (s *Symbols) resize(n int) {
	s.slots = make([]symSlot, n)
	if s.huge {
		hugepage.Advise(s.slots)
	}
	for i := range s.slots {
		s.slots[i].id = -1
	}
	for id, v := range s.names {
		h := maphash.String(s.seed, v)
		s.place(symSlot{tag: uint32(h >> 32), id: int32(id)}, h)
	}
	s.indexed = len(s.names)
}

// copyString returns a string holding b's bytes, copied into the current
// chunk (a new one when it is full). Chunks are never written again where
// a string points, so the strings are immutable.
func (s *Symbols) copyString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > cap(s.arena)-len(s.arena) {
		if len(b) > symbolChunk/4 {
			return string(b) // a long string gets its own allocation
		}
		s.arena = make([]byte, 0, symbolChunk)
	}
	start := len(s.arena)
	s.arena = append(s.arena, b...)
	return unsafe.String(&s.arena[start], len(b))
}
