package partstate

// addFoldedKeys adds a folded day's keys to the dedupe set (a state loaded
// from a snapshot or the store: the keys of its folded days are in their
// tables).
func (s *State) addFoldedKeys(t *DayTable) { s.AddFoldedKeysOf(t.keys) }
