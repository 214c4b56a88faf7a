// Package llm holds the models an eval calls: the Model interface every
// model under evaluation and every judge implements, the deterministic,
// network-free Stub, the Anthropic Messages adapter and the
// OpenAI-compatible chat adapter (over provider/openai), the registry that
// resolves a model id (Models), the call role of a model call's span
// (WithRole) and the price book that turns tokens into dollars.
//
// Adapters never retry; a provider's error status is ErrStatus, an answer
// that does not decode ErrMalformed, a missing key ErrNoKey.
package llm
