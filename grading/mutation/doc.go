// Package mutation measures the RAG checker itself (verdryx mutate): Run
// answers every golden case of an eval set, then grades mutated answers the
// checker must fail (sensitivity) and controlled variants it must pass
// (specificity), with the graders eval uses. InlineRAGSet builds the eval
// set from a corpus and a golden file.
package mutation
