// Package producer owns every durable write verdryx makes outward: the envelope
// sinks (File, DedupeFile, AppendFile for the chained NDJSON file;
// NATSChain for an instance's chain subject, with the expected last
// subject sequence on every append so two writers cannot fork it; Fanout
// to write both), the asynchronous publisher of row batches with bounded
// in-flight publishes and duplicate counting (AsyncPublisher), the
// dead-letter publisher (DeadLetterPublisher: reason and origin in
// Verdryx-Dead-* headers, an id derived from the origin so a repeat is
// dropped), single stored publishes (Store), and OpenTelemetry spans over
// OTLP/HTTP (Spans). A reply to a requester is one core NATS publish, made
// by its handler (evalreq, ragask).
//
// Sinks block until what they write is durable (fsynced, or acknowledged by
// JetStream) or their context is done. Package producer imports no consumer package,
// and no consumer package imports it.
package producer
