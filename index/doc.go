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
// Every row also has an int8 copy: codes in [-127, 127], a per-row scale and
// an upper bound on the norm of the quantisation error. A single query is
// quantised the same way and scanned against the copy first (a quarter of
// the bytes), which gives every row an interval that provably holds its
// exact float32 score (quant.go has the derivation: both quantisation
// errors and the float32 rounding of the exact kernel). Only rows whose
// upper bound reaches the k-th best lower bound are scored in float32, with
// the kernel a full scan uses, so results equal a full float32 scan's bit
// for bit. The int8 kernel is picked from the CPU at construction
// (AVX-512 VNNI, AVX-512BW, AVX2, portable); they compute the same integers.
//
// A quantized index (NewQuantizedBuilder, and every stored generation)
// keeps only the int8 copy: its rows are, component by component, the
// float32 products scale*code, the copy's error bound is that rounding
// alone, and every score is exact for those rows. A row costs dims + 4
// bytes on disk instead of 5*dims + 8.
//
// A generation lives in <data>/index/generations/<32-hex id>/:
// manifest.json, vectors.i8 (dTypeQuantized), ids (one a line), corpus.json
// (the corpus it was built from) and the files its reader adds (package
// rag: the chunk offsets and the BM25 statistics). The manifest records
// every file's size and SHA-256 and its fingerprint covers them. A save
// writes and fsyncs them in a staging directory, publishes it by an atomic
// rename, reads it back in full (Verify) and only then replaces
// <data>/index/active.json atomically, so a reader sees either the
// complete old or the complete new generation. Opening a generation checks
// what is cheap (the manifest, its fingerprint, every file's size) and
// reads no digest, so a cold process opens one in the time it takes to
// read its vectors; Verify (verdryx index verify) checks everything.
//
// The package imports nothing else of verdryx.
package index
