// Package envelope implements the agent-event envelope contract
// (schema taipanbox.dev/agent-event/v0.2): the event type with validation of
// every field rule, RFC 8785 (JCS) canonical bytes, the SPEC 6.5 prev_hash
// chain, a chained NDJSON writer and chain verification.
//
// The hash of an event is "sha256:" + lowercase hex of SHA-256 over the JCS
// canonical form of the event as written, with its own prev_hash removed.
// Unknown top-level members and unknown data keys are part of the hash, so an
// Event decoded from a line keeps them and re-encodes them unchanged.
//
// The package imports nothing else of verdryx.
package envelope
