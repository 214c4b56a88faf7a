package index

import "context"

// Embedder turns texts into vectors. Implementations must be safe for
// concurrent use. Embed returns one vector per text, in order, all of the
// same length; it may block on the network and honours ctx.
type Embedder interface {
	// Name identifies the implementation (for example "offline-hash").
	Name() string
	// Model identifies the model and every parameter that changes the
	// vectors; a persisted generation is stale when it differs.
	Model() string
	// Embed returns the vectors of texts.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}
