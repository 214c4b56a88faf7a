// Package embedded starts the in-process NATS server with JetStream that
// `verdryx serve` runs when no --nats URL is given (Start, StartWith), with
// its authentication and TLS (Security), and tells whether a listen
// address stays on loopback (IsLoopback).
package embedded
