// Package streams names and creates the JetStream side of verdryx: the
// subjects and streams (Subjects, DefaultSubjects), their retention, the
// durable consumers of the bare traces subject and of eval requests
// (EnsureStreams), KV buckets (EnsureKV), and which reply subjects a
// request may name (ReplyPolicy). Ensuring is idempotent and only reads
// what already matches, so every worker runs it at start.
package streams
