// Package httpapi is the worker's HTTP surface: /healthz, /readyz,
// /metrics and /report (Server), and the Prometheus metrics the
// consumers count into (Metrics).
package httpapi
