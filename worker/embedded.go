package worker

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// StartEmbedded starts an in-process NATS server with JetStream storing
// under storeDir, listening on listen ("host:port"; port 0 or -1 picks a
// free one) so other clients can connect. It blocks until the server
// accepts connections (at most 10 s). Shut it down with Shutdown then
// WaitForShutdown.
func StartEmbedded(storeDir, listen string) (*server.Server, error) {
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
	opts := &server.Options{
		ServerName: "verdryx-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   storeDir,
		NoSigs:     true,
		NoLog:      true,
		// Leave the HTTP monitor off; verdryx serves its own /metrics.
	}
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		return nil, errors.New("embedded nats: not ready after 10s (is the port in use?)")
	}
	return s, nil
}
