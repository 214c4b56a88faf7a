package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/verdryx/verdryx/evalreq"
	"github.com/verdryx/verdryx/fleet"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/segpub"
	"github.com/verdryx/verdryx/store"
)

// Output is one thing a run reports, in the order it happens, on the
// channel of Worker.Outputs. Exactly one field is set.
type Output struct {
	// ReplayRows is a progress mark while ReplayDir is published (without
	// Follow): the rows published so far. Marks are dropped rather than
	// wait for a slow reader.
	ReplayRows int
	// Replay is what the replay of ReplayDir (without Follow) published,
	// once every segment was.
	Replay *segpub.Stats
	// Eval is an eval request finished by this run or, at the end of a
	// Once run that drained, one of EvalRequestFiles another run had
	// already finished (Earlier).
	Eval *EvalOutput
	// Traces is last in a Once run that drained (or was stopped): the
	// fleet's merged trace aggregate, every partition snapshotted.
	Traces *fleet.Aggregate
}

// EvalOutput is a finished eval request and its result.
type EvalOutput struct {
	Request evalreq.Request
	Result  evalrun.Result
	// Earlier marks a result stored by an earlier run (the request was
	// not graded again).
	Earlier bool
}

// outputs is the stream of Worker.Outputs: nil until asked for.
type outputs struct {
	mu   sync.Mutex
	ch   chan Output
	seen map[string]bool // eval requests reported by this run
}

// Outputs returns the channel on which Run reports what it does (Output),
// for the caller to print. Call it before Run, at most once; the caller
// must receive until the channel is closed, which Run does when it
// returns: Run blocks on a send (progress marks excepted) until it is
// received. A worker whose Outputs is never called reports nothing.
func (w *Worker) Outputs() <-chan Output {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	if w.out.ch == nil {
		w.out.ch = make(chan Output, 16)
		w.out.seen = map[string]bool{}
	}
	return w.out.ch
}

// emit sends o when Outputs was called; a progress mark is dropped if the
// reader is behind.
func (w *Worker) emit(o Output) {
	w.out.mu.Lock()
	ch := w.out.ch
	if ch != nil && o.Eval != nil {
		w.out.seen[o.Eval.Request.RequestID] = true
	}
	w.out.mu.Unlock()
	if ch == nil {
		return
	}
	if o.ReplayRows > 0 {
		select {
		case ch <- o:
		default:
		}
		return
	}
	ch <- o
}

// streaming reports whether Outputs was called.
func (w *Worker) streaming() bool {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	return w.out.ch != nil
}

// reported reports whether this run already emitted eval request id.
func (w *Worker) reported(id string) bool {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	return w.out.seen[id]
}

// closeOutputs ends the stream (Run's last act).
func (w *Worker) closeOutputs() {
	w.out.mu.Lock()
	defer w.out.mu.Unlock()
	if w.out.ch != nil {
		close(w.out.ch)
	}
}

// emitEarlier emits the results of EvalRequestFiles that are done in st
// but were not reported by this run: requests an earlier run graded,
// which this run acknowledged without grading again.
func (w *Worker) emitEarlier(ctx context.Context, st *store.Store) error {
	for _, f := range w.evalFiles {
		req := f.req
		if w.reported(req.RequestID) {
			continue
		}
		rec, ok, err := st.EvalRequestState(ctx, req.RequestID)
		if err != nil {
			return err
		}
		if !ok || rec.State != store.RequestDone {
			continue
		}
		var res evalrun.Result
		if err := json.Unmarshal(rec.Result, &res); err != nil {
			return fmt.Errorf("stored result of eval request %s: %w", req.RequestID, err)
		}
		w.emit(Output{Eval: &EvalOutput{Request: req, Result: res, Earlier: true}})
	}
	return nil
}
