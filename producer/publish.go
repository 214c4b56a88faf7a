package producer

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StoreTimeout bounds one JetStream publish made through Store.
const StoreTimeout = 10 * time.Second

// Store publishes msg to JetStream under the message id id (so a retried
// publish is stored once) and blocks until the stream acknowledges it, at
// most StoreTimeout beyond ctx. It is the one path for single stored
// publishes (tail forwarding, eval requests given at start, the router,
// dead-letter re-drives); events, dead letters and replay have their own
// publishers in this package. The worker's paths call it through
// Retrier.Store, which retries it while the stream has no leader.
func Store(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, id string) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, StoreTimeout)
	defer cancel()
	var opts []jetstream.PublishOpt
	if id != "" {
		opts = append(opts, jetstream.WithMsgID(id))
	}
	ack, err := js.PublishMsg(ctx, msg, opts...)
	if err != nil {
		return nil, fmt.Errorf("publish to %s: %w", msg.Subject, err)
	}
	return ack, nil
}
