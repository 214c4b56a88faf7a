package embedded

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Security configures who may connect to the embedded server. The
// zero value is an open server, fit only for a loopback listen address
// (serve refuses a non-loopback one without auth unless told --nats-insecure).
type Security struct {
	// User and Password, or Token, require every client to authenticate.
	User, Password, Token string
	// ConfigFile is a nats-server configuration file (accounts, users with
	// subject permissions, nkeys, operator/JWT resolver, TLS); its settings
	// are applied before the ones above. See docs/nats-permissions.conf.
	ConfigFile string
	// TLSCert and TLSKey turn on TLS for the client listener.
	TLSCert, TLSKey string
	// Insecure allows a non-loopback listen address without
	// authentication (serve's --nats-insecure); New refuses one otherwise.
	Insecure bool
}

// HasAuth reports whether clients must authenticate.
func (s Security) HasAuth() bool {
	return s.User != "" || s.Token != "" || s.ConfigFile != ""
}

// StartWith is Start with authentication and TLS.
func StartWith(storeDir, listen string, sec Security) (*server.Server, error) {
	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return nil, fmt.Errorf("embedded nats listen address %q: %w", listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded nats listen port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{}
	if sec.ConfigFile != "" {
		opts, err = server.ProcessConfigFile(sec.ConfigFile)
		if err != nil {
			return nil, fmt.Errorf("embedded nats config %s: %w", sec.ConfigFile, err)
		}
	}
	opts.ServerName = "verdryx-embedded"
	opts.Host, opts.Port = host, port
	opts.JetStream, opts.StoreDir = true, storeDir
	opts.NoSigs, opts.NoLog = true, true
	if sec.User != "" {
		if sec.Password == "" {
			return nil, errors.New("embedded nats: a user needs a password")
		}
		opts.Username, opts.Password = sec.User, sec.Password
	}
	if sec.Token != "" {
		opts.Authorization = sec.Token
	}
	if (sec.TLSCert == "") != (sec.TLSKey == "") {
		return nil, errors.New("embedded nats TLS: give both a certificate and a key")
	}
	if sec.TLSCert != "" {
		tc, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: sec.TLSCert, KeyFile: sec.TLSKey})
		if err != nil {
			return nil, fmt.Errorf("embedded nats TLS: %w", err)
		}
		opts.TLSConfig, opts.TLS = tc, true
		opts.AllowNonTLS = false
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s (is the port in use? serve --nats-listen HOST:PORT picks another; port 0 a free one)")
	}
	return s, nil
}

// IsLoopback reports whether a listen address ("host:port") binds only
// the loopback interface. An empty host, 0.0.0.0 and :: bind every one.
func IsLoopback(listen string) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = listen
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
