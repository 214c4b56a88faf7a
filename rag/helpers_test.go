package rag

// rank returns the rows with a positive score for query, best first (ties
// by row), at most depth of them, restricted to allowed when it is non-nil.
func (s *bm25) rank(query string, allowed map[int]bool, depth int) []int {
	rows, _ := s.rankErr(query, allowed, depth)
	return rows
}
