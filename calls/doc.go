// Package calls is the call schema every layer speaks: a TokenFuse call
// (Call) and its record form (CallRecord), the segment columns (Field,
// FieldSet, the Col* names), column batches (Batch) with their string
// tables (Symbols), decision classes, the NDJSON and CSV record readers,
// RecordDecoder, the one decoder of per-call records (--input, tailed
// lines and trace messages), and DecodeStrict, the strict encoding/json
// decoder of the worker's requests, which is also RecordDecoder's
// reference and the author of its error messages. It reduces nothing:
// outcome does.
//
// Of verdryx it imports only internal/hugepage (Symbols can ask for huge
// pages), so every other package can import it.
package calls
