package envelope

// head returns the hash the next event will carry as prev_hash ("" when
// the next event starts a new chain).
// After a failed write or fsync it re-reads the end of the file first.
func (w *Writer) head() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.reloadIfStale(); err != nil {
		w.logger.Warn("head of the events file unknown", "err", err)
	}
	return w.prev
}
