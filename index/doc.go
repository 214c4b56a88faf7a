// Package index embeds text and answers exact cosine top-k queries over one
// contiguous float32 matrix, and persists that matrix as immutable,
// fingerprinted generations on disk.
//
// Vectors are validated on the way in (finite, non-zero, of the index's
// dimension), normalised with a float64 norm accumulator and stored as unit
// float32 rows. Similarity is the dot product of unit vectors clipped to
// [-1, 1]; distance is 1 - similarity. Results are ranked by descending
// similarity, then ascending id, and selected with a bounded heap, never by
// sorting all rows.
//
// A generation lives in <data>/index/generations/<32-hex id>/ (manifest.json,
// vectors.f32 and corpus.json, the copy of the corpus it was built from) and is published by an atomic rename; <data>/index/active.json
// names the active one and is replaced atomically. Files and directories are
// fsynced, so a reader sees either the complete old or the complete new
// generation while a save runs.
//
// The package imports nothing else of verdryx.
package index
