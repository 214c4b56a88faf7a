package main

import (
	"context"
	"log/slog"
	"strings"
)

// serveOptionFlags pairs each option name the worker (and the packages it
// runs) write in errors and logs with the serve flag that sets it, the
// longer of two names sharing a prefix first.
func serveOptionFlags() *strings.Replacer {
	return strings.NewReplacer(
		"Options.Security.Insecure", "--nats-insecure",
		"Options.Security", "--nats-user/--nats-password, --nats-token or --nats-config",
		"Options.DataDir", "--data",
		"Options.Listen", "--nats-listen",
		"Options.HTTPAddr", "--http",
		"Options.HTTPPublic", "--http-public",
		"Options.ReplayDir", "--replay",
		"Options.Follow", "--follow",
		"Options.Once", "--once",
		"Options.EvalRequestFiles", "--eval-request",
		"Options.Roots", "--root",
		"Options.MaxCostUSD", "--max-cost-usd",
		"Options.AllowModels", "--allow-model",
		"Options.Judge", "--judge",
		"Options.Prices", "--prices",
		"Options.Instance", "--instance",
		"Options.EventsPath", "--events",
		"Options.OTLPEndpoint", "--otlp",
		"Options.TailPath", "--tail",
		"Options.RAGCorpus", "--rag-corpus",
		"Options.PublishRetryFor", "--publish-retry-for",
		"Options.StartTimeout", "--start-timeout",
		"Subjects.Partitions", "--partitions",
	)
}

// flagNamed is an error whose message names flags where the error it
// wraps names options.
type flagNamed struct {
	msg string
	err error
}

func (e *flagNamed) Error() string { return e.msg }
func (e *flagNamed) Unwrap() error { return e.err }

// withFlagNames returns err with the option names of r replaced by their
// flags; errors.Is and errors.As see through it to err.
func withFlagNames(r *strings.Replacer, err error) error {
	if err == nil {
		return nil
	}
	if msg := r.Replace(err.Error()); msg != err.Error() {
		return &flagNamed{msg: msg, err: err}
	}
	return err
}

// flagNamesHandler writes records with the option names of r in their
// message replaced by their flags.
type flagNamesHandler struct {
	slog.Handler
	r *strings.Replacer
}

func (h flagNamesHandler) Handle(ctx context.Context, rec slog.Record) error {
	if msg := h.r.Replace(rec.Message); msg != rec.Message {
		// Only the message changes: time, level, source and attributes
		// are carried over.
		out := slog.NewRecord(rec.Time, rec.Level, msg, rec.PC)
		rec.Attrs(func(a slog.Attr) bool { out.AddAttrs(a); return true })
		rec = out
	}
	return h.Handler.Handle(ctx, rec)
}

func (h flagNamesHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return flagNamesHandler{h.Handler.WithAttrs(as), h.r}
}

func (h flagNamesHandler) WithGroup(name string) slog.Handler {
	return flagNamesHandler{h.Handler.WithGroup(name), h.r}
}
