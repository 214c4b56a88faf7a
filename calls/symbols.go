package calls

// Symbols interns strings to dense int32 ids. Id 0 is always "", so a zeroed
// id column reads as empty strings. A Symbols is not safe for concurrent use.
type Symbols struct {
	ids   map[string]int32
	names []string
}

// NewSymbols returns a table holding only "" (id 0).
func NewSymbols() *Symbols {
	return &Symbols{ids: map[string]int32{"": 0}, names: []string{""}}
}

// Intern returns the id of b, adding it if new. It does not retain b.
func (s *Symbols) Intern(b []byte) int32 {
	if id, ok := s.ids[string(b)]; ok {
		return id
	}
	return s.add(string(b))
}

// InternString returns the id of v, adding it if new.
func (s *Symbols) InternString(v string) int32 {
	if id, ok := s.ids[v]; ok {
		return id
	}
	return s.add(v)
}

func (s *Symbols) add(v string) int32 {
	id := int32(len(s.names))
	s.ids[v] = id
	s.names = append(s.names, v)
	return id
}

// Lookup returns the id of v and whether it is interned.
func (s *Symbols) Lookup(v string) (int32, bool) {
	id, ok := s.ids[v]
	return id, ok
}

// Name returns the string of id. It panics on an id the table never issued.
func (s *Symbols) Name(id int32) string { return s.names[id] }

// Len returns the number of interned strings, "" included.
func (s *Symbols) Len() int { return len(s.names) }
