// Package tailfwd forwards a followed NDJSON file (consumer/tail) to the
// subjects: agent events to the tail subject, call records to
// their partition subjects, and what is not usable to the
// dead letters (Forwarder).
package tailfwd
