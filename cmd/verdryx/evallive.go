package main

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/verdryx/verdryx/grading"
)

// evalLive prints each case's line as it finishes. When stdout is not a
// terminal the lines come in case order (a finished case waits for the
// ones before it); on a terminal they come as they finish. A terminal
// stderr gets a progress bar. With --json nothing is printed live but the
// bar.
type evalLive struct {
	mu      sync.Mutex
	out     io.Writer
	bar     *progressbar.ProgressBar
	inOrder bool
	width   int
	next    int
	done    map[int]grading.Score
	// printed is true when the header and the case lines were printed
	// live (the final report then prints only the totals).
	printed bool
}

func newEvalLive(stdout, stderr io.Writer, set *grading.EvalSet, model, judge string, asJSON bool) *evalLive {
	l := &evalLive{out: stdout, inOrder: !isTerminal(stdout), done: map[int]grading.Score{}, printed: !asJSON}
	ids := make([]string, len(set.Cases))
	for i, c := range set.Cases {
		ids[i] = c.ID
	}
	l.width = caseWidth(ids)
	if isTerminal(stderr) {
		l.bar = progressbar.NewOptions(len(set.Cases), progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("grading"), progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100*time.Millisecond))
	}
	if l.printed {
		if !slices.ContainsFunc(set.Cases, func(c grading.Case) bool { return c.Kind() == grading.GraderLLMJudge }) {
			judge = "" // recorded only when it grades something
		}
		printEvalHeader(stdout, set.ID, set.Digest, model, judge)
	}
	return l
}

// onCase is grading's per-case callback.
func (l *evalLive) onCase(i int, s grading.Score) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bar != nil {
		_ = l.bar.Clear()
		defer func() { _ = l.bar.Add(1) }()
	}
	if !l.printed {
		return
	}
	if !l.inOrder {
		printEvalCase(l.out, s, l.width)
		return
	}
	l.done[i] = s
	for {
		s, ok := l.done[l.next]
		if !ok {
			return
		}
		delete(l.done, l.next)
		printEvalCase(l.out, s, l.width)
		l.next++
	}
}

// finish removes the progress bar.
func (l *evalLive) finish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.bar != nil {
		_ = l.bar.Finish()
	}
	if n := len(l.done); n > 0 {
		fmt.Fprintf(l.out, "  (%d cases finished out of order were not printed)\n", n)
	}
}
