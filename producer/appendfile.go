package producer

import (
	"fmt"

	"github.com/verdryx/verdryx/envelope"
)

// AppendFile appends evs in order to the chained events file at path
// (created when missing, resumed when not) and closes it, so with a nil
// error every written event is on disk (envelope.SyncOnClose). It returns
// how many were written: an event without agent_id is skipped and not
// counted. It stops at the first event that is not written. With no
// events the file is not opened.
func AppendFile(path string, evs []envelope.Event) (int, error) {
	if len(evs) == 0 {
		return 0, nil
	}
	w, err := envelope.OpenWriter(path, envelope.WriterOptions{Sync: envelope.SyncOnClose})
	if err != nil {
		return 0, fmt.Errorf("open events file: %w", err)
	}
	n := 0
	for _, ev := range evs {
		ok, err := w.Append(ev)
		if err != nil {
			w.Close()
			return n, fmt.Errorf("append %s event: %w", ev.Type, err)
		}
		if ok {
			n++
		}
	}
	if err := w.Close(); err != nil {
		return n, fmt.Errorf("close events file: %w", err)
	}
	return n, nil
}
