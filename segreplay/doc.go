// Package segreplay publishes a directory of Parquet segments to the
// partition subjects of the traces stream as row batches (Replay): what
// `verdryx replay` and `serve --replay` do, the start of the trace path.
package segreplay
