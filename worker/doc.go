// Package worker holds the handlers the verdryx worker runs on NATS
// subjects: trace ingestion into the store, eval requests, RAG asks, the
// NDJSON tail forwarder, and the streams and metrics they need; and the
// Worker (New, Run) that assembles them into one process with oklog/run,
// decides when --once inputs are drained and shuts down in order.
// cmd/verdryx only maps flags and env to Options.
package worker
