// Package ragask answers RAG asks on a core NATS subject with
// request/reply, in a queue group shared by every worker (Server).
package ragask
