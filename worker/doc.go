// Package worker holds the handlers the verdryx worker runs on NATS
// subjects: trace ingestion into the store, eval requests, RAG asks, the
// NDJSON tail forwarder, and the streams and metrics they need. cmd/verdryx
// wires them into one process with oklog/run.
package worker
