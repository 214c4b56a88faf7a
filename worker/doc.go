// Package worker assembles the verdryx worker from the packages that hold
// its parts: it takes Options, opens the store, starts or connects to NATS
// (embedded, streams), takes the instance lease (lease), and runs as
// oklog/run actors the fleet of trace partitions (fleet), the eval
// consumer (evalreq), RAG asks (ragask), the tail forwarder (tailfwd), the
// HTTP surface (httpapi) and the inputs published at start (segpub);
// it decides when --once inputs are drained and shuts down in order
// (New, Run). cmd/verdryx only maps flags and env to Options.
package worker
