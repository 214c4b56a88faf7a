// Package consumer holds no code: verdryx's inputs live in one subpackage per
// source.
//
//   - consumer/pull: the JetStream pull loop (Puller), its error classes
//     (Kind, Permanent, Transient) and the dead-letter hook.
//   - consumer/segment: the TokenFuse Parquet segment reader (Scanner,
//     Read, List).
//   - consumer/tail: the NDJSON tailer (Tailer) and its line classifier
//     (LineChecker, LineKind).
//
// None of them imports package producer, and producer imports none of them.
package consumer
