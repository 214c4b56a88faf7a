// Package tracesource folds the calls of a report's one source into an
// outcome.Reducer: a directory of TokenFuse segments, a record input (a
// file, a directory of Parquet files, or standard input), or the merged
// partition aggregates a fleet of workers keeps on JetStream. It is what
// cost-per-correct, slo and report read. It prints nothing: a Result says
// what a caller may want to tell, and an error says whose fault it is
// (UsageError for the caller's choice, InputError for the data's).
package tracesource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/outcome"
	"github.com/verdryx/verdryx/outcome/segfold"
	"github.com/verdryx/verdryx/segment"
	"github.com/verdryx/verdryx/streams"
)

// Source names where the calls come from: at most one of Traces, Input
// and Fleet. With none, Traces is the TokenFuse directory of the
// environment (segment.EnvDir), when it names one.
type Source struct {
	// Traces is a directory of TokenFuse segments (segment.List): a bad
	// segment is skipped and named in Result.Dir.Failed unless Strict.
	Traces string
	// Input is a record input (segfold.ReduceInput): a Parquet file or a
	// directory of them, a JSON array, NDJSON or CSV record file, or
	// segfold.Stdin for Stdin.
	Input string
	Stdin io.Reader
	// Fleet, when set, connects to the JetStream whose merged partition
	// aggregates of the workers on Subjects (its Partitions as the
	// workers use) are read; it is called once, after the source is
	// checked. The reducer is the fleet's: its runs whole, so Options.By
	// must be empty.
	Fleet    func() (jetstream.JetStream, error)
	Subjects streams.Subjects

	// Strict makes a bad segment of Traces fatal.
	Strict bool
	// AllowEmpty reports a source with no calls; otherwise it is refused
	// with ErrEmpty.
	AllowEmpty bool
	// Alone says the process reads this source and exits: the read may
	// take huge pages and tune the collector (segfold.DirOptions).
	Alone bool
	// Procs is how many goroutines reduce Traces' or Input's Parquet row
	// groups (0: GOMAXPROCS); the reduction is the same for any value.
	Procs int
	// Progress, if non-nil, is called once before Traces is read, with
	// the bytes and the count of its segments, and returns what is called
	// after each segment (from the readers, one call at a time) or nil.
	Progress func(bytes int64, segments int) func(segment.Segment)
}

// Result is a folded source.
type Result struct {
	Reducer *outcome.Reducer
	// Traces is the directory read, set when Traces was (or the
	// environment's was) the source; FromEnv says it came from
	// segment.DirEnv.
	Traces  string
	FromEnv bool
	// Dir is the directory's figures (segments read, skipped as bad,
	// other files ignored); nil for the other sources.
	Dir *segfold.DirStats
	// Late is, for Fleet, the calls that arrived after their day had
	// passed the workers' retention: reported, not counted.
	Late int64
}

// Errors of the caller's choice, each the Err of a UsageError.
var (
	// ErrSources: not exactly one source (and none in the environment).
	ErrSources = errors.New("exactly one source, got another number")
	// ErrEmpty: the source holds no calls and AllowEmpty is off.
	ErrEmpty = errors.New("the source holds no calls")
	// ErrGroupedFleet: Options.By with Fleet, whose runs are whole.
	ErrGroupedFleet = errors.New("the fleet's runs are kept whole: they cannot be grouped by a call's field")
)

// InputError is a failure of the data read: a bad segment or record. Its
// text is the cause's.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

// UsageError is an error of the source's choice or window, not of the
// data read or of a service. Its text is the cause's.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

func usage(err error) error { return &UsageError{err} }

// Given reports how many of Traces, Input and Fleet are set.
func (s Source) Given() int {
	n := 0
	for _, set := range []bool{s.Traces != "", s.Input != "", s.Fleet != nil} {
		if set {
			n++
		}
	}
	return n
}

// Dir is the segment directory Reduce reads for s: Traces, else, with no
// source given, the environment's TokenFuse directory (segment.EnvDir);
// "" when s reads none.
func (s Source) Dir() string {
	if s.Traces == "" && s.Given() == 0 {
		return segment.EnvDir()
	}
	return s.Traces
}

// Reduce folds the one source of s into a reducer made with opts. It
// blocks until the source is read or ctx is done.
func Reduce(ctx context.Context, s Source, opts outcome.Options) (*Result, error) {
	res := &Result{}
	if s.Given() == 0 {
		s.Traces = s.Dir()
		res.FromEnv = s.Traces != ""
	}
	if s.Given() != 1 {
		return nil, usage(ErrSources)
	}
	if s.Procs < 0 {
		return nil, usage(fmt.Errorf("procs %d: want at least 1 (0: GOMAXPROCS)", s.Procs))
	}
	if s.Procs == 0 {
		s.Procs = runtime.GOMAXPROCS(0)
	}
	if s.Fleet != nil {
		if err := s.reduceFleet(ctx, opts, res); err != nil {
			return nil, err
		}
		return res, nil
	}
	r, err := outcome.NewReducer(opts)
	if err != nil {
		return nil, usage(err)
	}
	res.Reducer = r
	if s.Input != "" {
		if _, err := segfold.ReduceInput(ctx, s.Input, s.Stdin, r, s.Procs); err != nil {
			return nil, &InputError{err}
		}
		if st := r.Stats(); st.Calls == 0 && st.Records == 0 && !s.AllowEmpty {
			return nil, usage(fmt.Errorf("%w: %s holds no records", ErrEmpty, s.Input))
		}
		return res, nil
	}
	res.Traces = s.Traces
	st, err := s.reduceDir(ctx, r)
	if err != nil {
		return nil, err
	}
	res.Dir = &st
	if st.Segments+len(st.Failed) == 0 && !s.AllowEmpty {
		return nil, usage(fmt.Errorf("%w: %s holds no TokenFuse segments", ErrEmpty, s.Traces))
	}
	return res, nil
}

// reduceDir replays the segments of s.Traces into r.
func (s Source) reduceDir(ctx context.Context, r *outcome.Reducer) (segfold.DirStats, error) {
	if fi, err := os.Stat(s.Traces); err != nil {
		return segfold.DirStats{}, &InputError{fmt.Errorf("traces: %w", err)}
	} else if !fi.IsDir() {
		return segfold.DirStats{}, usage(fmt.Errorf("traces %s: not a directory", s.Traces))
	}
	segs, ignored, err := segment.List(s.Traces)
	if err != nil {
		return segfold.DirStats{}, &InputError{err}
	}
	opts := segfold.DirOptions{Strict: s.Strict, Procs: s.Procs, HugePages: s.Alone, TuneGC: s.Alone}
	if s.Progress != nil {
		var total int64
		for _, sg := range segs {
			total += sg.Size
		}
		opts.OnSegment = s.Progress(total, len(segs))
	}
	st, err := segfold.ReduceSegments(ctx, segs, ignored, r, opts)
	if err != nil && segment.IsError(err) {
		return st, &InputError{err}
	}
	return st, err
}

// reduceFleet reads the fleet's merged aggregates for opts' window.
func (s Source) reduceFleet(ctx context.Context, opts outcome.Options, res *Result) error {
	if opts.By != "" {
		return usage(ErrGroupedFleet)
	}
	js, err := s.Fleet()
	if err != nil {
		return err
	}
	agg, err := fleet.ReadAggregateFor(ctx, js, s.Subjects, opts)
	if err == nil {
		res.Reducer, err = agg.Reducer(opts)
	}
	switch {
	case errors.Is(err, fleet.ErrWindowNotWholeHours), errors.Is(err, fleet.ErrWindowCutsWholeDay):
		return usage(err)
	case err != nil:
		return err
	}
	res.Late = int64(agg.Late())
	return nil
}
