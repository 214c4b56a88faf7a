package segpub

// totals returns the totals of what the follower published.
func (f *Follower) totals() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.stats
	st.Failed = append([]string(nil), st.Failed...)
	return st
}
