// Package ratelog logs repeated warnings once per interval, with the count
// held back: a failure that repeats every few milliseconds (a full disk, a
// node away) is one line per interval, not thousands.
package ratelog

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Log logs a repeated identical warning once per interval with the
// number of repeats it held back, so an outage that fails every message
// does not flood the log. It is safe for concurrent use.
type Log struct {
	log      *slog.Logger
	interval time.Duration
	now      func() time.Time

	mu   sync.Mutex
	seen map[string]*logState
}

type logState struct {
	last       time.Time
	suppressed int
}

// New returns a Log writing to log at most once per interval for each
// message and root-cause error text. It is safe for concurrent use.
func New(log *slog.Logger, interval time.Duration) *Log {
	return &Log{log: log, interval: interval, now: time.Now, seen: make(map[string]*logState)}
}

// Warn logs msg with args unless the same msg and error text were logged
// within the interval; the next one that is logged carries "repeated", the
// count held back since.
func (l *Log) Warn(msg string, args ...any) {
	key := msg
	for i := 0; i+1 < len(args); i += 2 {
		if k, _ := args[i].(string); k == "err" {
			if e, ok := args[i+1].(error); ok {
				key += "\x00" + rootCause(e).Error()
			}
		}
	}
	now := l.now()
	l.mu.Lock()
	st := l.seen[key]
	if st != nil && now.Sub(st.last) < l.interval {
		st.suppressed++
		l.mu.Unlock()
		return
	}
	if st == nil {
		if len(l.seen) > 1024 { // bound the memory of distinct messages
			clear(l.seen)
		}
		st = &logState{}
		l.seen[key] = st
	}
	repeated := st.suppressed
	st.last, st.suppressed = now, 0
	l.mu.Unlock()
	if repeated > 0 {
		args = append(args, "repeated", repeated)
	}
	l.log.Log(context.Background(), slog.LevelWarn, msg, args...)
}

// rootCause is the innermost error of a wrap chain: the part of a message
// that repeats when the wrapping names a different record each time.
func rootCause(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}
