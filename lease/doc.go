// Package lease holds a worker's instance id in a JetStream KV bucket
// while it lives (Acquire): one live worker per id, hence per events
// chain subject. Eval claims read the bucket to tell a dead owner from a
// live one.
package lease
