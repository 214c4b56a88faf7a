// Package evalrun runs one eval request end to end, the flow the CLI's eval
// and the worker's eval requests share: Prepare validates the request
// (eval set, model, baseline, typed template, RAG pipeline) and refuses a
// bad one with grading.ErrBadRequest before anything is graded;
// Plan.Grade grades the set and checks drift; Execute also saves the run
// (Store) and emits its Events and Spans. CheckDrift runs a drift check
// alone and EmitDrift emits its event and span.
package evalrun
