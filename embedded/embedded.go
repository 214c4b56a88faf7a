package embedded

import "github.com/nats-io/nats-server/v2/server"

// Start starts an in-process NATS server with JetStream storing
// under storeDir, listening on listen ("host:port"; port 0 or -1 picks a
// free one) so other clients can connect. It blocks until the server
// accepts connections (at most 10 s). Shut it down with Shutdown then
// WaitForShutdown.
func Start(storeDir, listen string) (*server.Server, error) {
	return StartWith(storeDir, listen, Security{})
}
