// Package evalreq runs eval requests from the eval stream exactly once:
// decoding and validation (Decode, Validate), a claim per request id
// across workers (Claims, in the KV bucket ClaimBucket), grading, one
// commit of run, scores and result, the events emitted after it, and the
// reply (Handler).
package evalreq
