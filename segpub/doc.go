// Package segpub publishes a directory of Parquet segments to the
// partition subjects of the traces stream as row batches (Publish): what
// `verdryx replay` and `serve --replay` do, the start of the trace path.
package segpub
