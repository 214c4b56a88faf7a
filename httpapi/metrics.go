package httpapi

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/verdryx/verdryx/consumer/pull"
)

// Metrics are the worker's Prometheus metrics on a registry of its own.
type Metrics struct {
	Registry     *prometheus.Registry
	received     *prometheus.CounterVec
	acked        *prometheus.CounterVec
	naked        *prometheus.CounterVec
	terminated   *prometheus.CounterVec
	deadLettered *prometheus.CounterVec
	Lag          *prometheus.GaugeVec
	ChainLength  prometheus.Gauge
	EvalRuns     *prometheus.CounterVec
	EvalSeconds  prometheus.Histogram
	Asks         *prometheus.CounterVec
	// RAGGeneration is 1 for the index generation RAG asks are answered
	// from (label generation), absent while none is.
	RAGGeneration *prometheus.GaugeVec
	TailLines     *prometheus.CounterVec
	// SnapshotBytes counts the bytes of the partition snapshots written
	// (snapshot, aggregate and day tables put in the bucket).
	SnapshotBytes prometheus.Counter
	// PartitionLoad counts the seconds spent loading partition state
	// (takeovers, restarts, reloads), and the loads.
	PartitionLoad prometheus.Histogram
}

var _ pull.Counters = (*Metrics)(nil)

// NewMetrics registers the worker's metrics (and the Go runtime's and the
// process's: CPU seconds, resident memory, open files) on a new registry.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry:     prometheus.NewRegistry(),
		received:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_messages_received_total", Help: "Messages handed to a handler."}, []string{"consumer"}),
		acked:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_messages_acked_total", Help: "Messages acked after their effect was committed."}, []string{"consumer"}),
		naked:        prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_messages_naked_total", Help: "Messages nak'ed for redelivery after a transient failure."}, []string{"consumer"}),
		terminated:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_messages_terminated_total", Help: "Messages terminated with a reason."}, []string{"consumer"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_messages_dead_lettered_total", Help: "Messages copied to the dead-letter subject."}, []string{"consumer"}),
		Lag:          prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_consumer_lag", Help: "Messages pending for a durable consumer."}, []string{"consumer"}),
		ChainLength:  prometheus.NewGauge(prometheus.GaugeOpts{Name: "verdryx_chain_events", Help: "Events published on this instance's chain since start."}),
		EvalRuns:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_eval_runs_total", Help: "Eval requests finished, by result."}, []string{"result"}),
		EvalSeconds:  prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verdryx_eval_duration_seconds", Help: "Eval request duration.", Buckets: prometheus.ExponentialBuckets(0.01, 4, 8)}),
		Asks:         prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_rag_asks_total", Help: "RAG asks answered, by result."}, []string{"result"}),
		RAGGeneration: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "verdryx_rag_generation_info",
			Help: "1 for the index generation RAG asks are answered from."}, []string{"generation"}),
		TailLines: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "verdryx_tail_lines_total", Help: "Lines read by the tailer, by class."}, []string{"class"}),
		SnapshotBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "verdryx_snapshot_bytes_total",
			Help: "Bytes of the partition snapshots written to the KV bucket (snapshot, aggregate and folded day tables)."}),
		PartitionLoad: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "verdryx_partition_load_seconds",
			Help: "Time to load a partition's state on a takeover, restart or reload (snapshot or store, then the catch-up from the stream).", Buckets: prometheus.ExponentialBuckets(0.001, 4, 8)}),
	}
	m.Registry.MustRegister(m.received, m.acked, m.naked, m.terminated, m.deadLettered, m.Lag, m.ChainLength,
		m.EvalRuns, m.EvalSeconds, m.Asks, m.RAGGeneration, m.TailLines, m.SnapshotBytes, m.PartitionLoad, collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Received implements pull.Counters.
func (m *Metrics) Received(s string, n int) { m.received.WithLabelValues(s).Add(float64(n)) }

// Acked implements pull.Counters.
func (m *Metrics) Acked(s string, n int) { m.acked.WithLabelValues(s).Add(float64(n)) }

// Naked implements pull.Counters.
func (m *Metrics) Naked(s string, n int) { m.naked.WithLabelValues(s).Add(float64(n)) }

// Terminated implements pull.Counters.
func (m *Metrics) Terminated(s string, n int) { m.terminated.WithLabelValues(s).Add(float64(n)) }

// DeadLettered implements pull.Counters.
func (m *Metrics) DeadLettered(s string, n int) { m.deadLettered.WithLabelValues(s).Add(float64(n)) }

// Server serves /healthz, /readyz and /metrics, and /report when
// Report is set.
type Server struct {
	Addr    string
	Metrics *Metrics
	// Ready reports readiness: false while starting, stopping, or while
	// a consumer's last batch failed transiently (the store is failing).
	// nil is never ready.
	Ready func() bool
	// Report, when set, serves GET /report (the HTML report).
	Report http.Handler

	ln  net.Listener
	srv *http.Server
}

// Listen binds the address (so a bad address fails before the worker
// starts) and returns the bound address.
func (h *Server) Listen() (string, error) {
	ln, err := net.Listen("tcp", h.Addr)
	if err != nil {
		return "", err
	}
	h.ln = ln
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if h.Ready != nil && h.Ready() {
			_, _ = w.Write([]byte("ready\n"))
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(h.Metrics.Registry, promhttp.HandlerOpts{}))
	if h.Report != nil {
		mux.Handle("/report", h.Report)
	}
	h.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return ln.Addr().String(), nil
}

// Serve blocks serving until Shutdown.
func (h *Server) Serve() error {
	if err := h.srv.Serve(h.ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Shutdown stops the server, waiting up to 5 s for open requests.
func (h *Server) Shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = h.srv.Shutdown(ctx)
}
