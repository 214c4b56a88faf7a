package main

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/embedded"
	"github.com/verdryx/verdryx/streams"
)

// securityFlags are serve's trust-boundary flags: embedded-server auth and
// TLS, the file confinement limits and the reply subjects.
type securityFlags struct {
	sec         embedded.Security
	httpPublic  bool
	maxBytes    int64
	fileTimeout time.Duration
	replies     []string
}

func addSecurityFlags(fs *pflag.FlagSet) *securityFlags {
	s := &securityFlags{}
	fs.StringVar(&s.sec.User, "nats-user", envOr("VERDRYX_NATS_USER", ""), "user clients of the embedded server must log in as; serve connects as it too ($VERDRYX_NATS_USER)")
	fs.StringVar(&s.sec.Password, "nats-password", envOr("VERDRYX_NATS_PASSWORD", ""), "password of --nats-user ($VERDRYX_NATS_PASSWORD; prefer the env)")
	fs.StringVar(&s.sec.Token, "nats-token", envOr("VERDRYX_NATS_TOKEN", ""), "token clients of the embedded server must present ($VERDRYX_NATS_TOKEN; prefer the env)")
	fs.StringVar(&s.sec.ConfigFile, "nats-config", envOr("VERDRYX_NATS_CONFIG", ""), "nats-server config file for the embedded server: accounts, users with subject permissions, nkeys, JWT resolver ($VERDRYX_NATS_CONFIG; see docs/nats-permissions.conf)")
	fs.StringVar(&s.sec.TLSCert, "nats-listen-tls-cert", envOr("VERDRYX_NATS_LISTEN_TLS_CERT", ""), "certificate file: the embedded server accepts TLS clients only ($VERDRYX_NATS_LISTEN_TLS_CERT)")
	fs.StringVar(&s.sec.TLSKey, "nats-listen-tls-key", envOr("VERDRYX_NATS_LISTEN_TLS_KEY", ""), "key file of --nats-listen-tls-cert ($VERDRYX_NATS_LISTEN_TLS_KEY)")
	fs.BoolVar(&s.sec.Insecure, "nats-insecure", false, "allow a non-loopback --nats-listen without authentication (warned on every start)")
	fs.BoolVar(&s.httpPublic, "http-public", false, "allow a non-loopback --http address (/metrics has no authentication; warned on every start)")
	fs.Int64Var(&s.maxBytes, "files-max-bytes", confine.DefaultMaxBytes, "largest file (eval set, corpus, golden, segment) a message may name")
	fs.DurationVar(&s.fileTimeout, "files-timeout", confine.DefaultTimeout, "longest read of a file a message names")
	fs.StringArrayVar(&s.replies, "reply-subject", nil, "subject pattern eval replies may be sent to (repeatable; default _INBOX.> and verdryx.reply.>); never a verdryx stream subject")
	return s
}

// check refuses an exposed, unauthenticated start and logs a warning for
// every exposure the operator allowed explicitly.
func (s *securityFlags) check(ownServer bool, listen, httpAddr string, logger *slog.Logger) error {
	if ownServer && !embedded.IsLoopback(listen) {
		switch {
		case s.sec.HasAuth():
		case s.sec.Insecure:
			logger.Warn("INSECURE: the embedded NATS server listens beyond loopback without authentication; anyone who reaches it can publish eval requests and traces", "listen", listen)
		default:
			return usageErrorf("serve: --nats-listen %s is not a loopback address: give --nats-user/--nats-password, --nats-token or --nats-config (or --nats-insecure to run it open)", listen)
		}
		if s.sec.TLSCert == "" {
			logger.Warn("the embedded NATS server listens beyond loopback without TLS (--nats-listen-tls-cert/--nats-listen-tls-key)", "listen", listen)
		}
	}
	if httpAddr != "" && !embedded.IsLoopback(httpAddr) {
		if !s.httpPublic {
			return usageErrorf("serve: --http %s is not a loopback address: /metrics and /readyz have no authentication (give --http-public to serve them anyway)", httpAddr)
		}
		logger.Warn("INSECURE: /healthz, /readyz and /metrics are served beyond loopback without authentication", "http", httpAddr)
	}
	if s.maxBytes <= 0 || s.fileTimeout <= 0 {
		return usageErrorf("serve: --files-max-bytes and --files-timeout must be positive")
	}
	return nil
}

// replyPolicy returns where eval replies may go.
func (s *securityFlags) replyPolicy(subjects streams.Subjects) streams.ReplyPolicy {
	p := streams.ReplyPolicy{Forbidden: subjects.StreamSubjects()}
	if len(s.replies) > 0 {
		p.Allowed = append([]string(nil), s.replies...)
	}
	return p
}

// clientAuth returns the options serve's own connection authenticates
// with: the same user/password or token the embedded server requires, or
// the one an external server was given.
func (s *securityFlags) clientAuth() []nats.Option {
	var opts []nats.Option
	if s.sec.User != "" {
		opts = append(opts, nats.UserInfo(s.sec.User, s.sec.Password))
	}
	if s.sec.Token != "" {
		opts = append(opts, nats.Token(s.sec.Token))
	}
	return opts
}

// errNoTLSPair is returned for half a TLS key pair.
var errNoTLSPair = errors.New("give both --nats-tls-cert and --nats-tls-key")

func checkTLSPair(cert, key string) error {
	if (cert == "") != (key == "") {
		return fmt.Errorf("nats client TLS: %w", errNoTLSPair)
	}
	return nil
}
