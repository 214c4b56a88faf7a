// Package calls is the call schema every layer speaks: a TokenFuse call
// (Call) and its record form (CallRecord), the segment columns (Field,
// FieldSet, the Col* names), column batches (Batch) with their string
// tables (Symbols), decision classes, the NDJSON and CSV record readers,
// and RecordDecoder, the one decoder of per-call records (--input, tailed
// lines and trace messages), whose reference and error wording is
// internal/strictjson (the strict encoding/json decoding eval requests and
// asks use too). It reduces nothing: outcome does.
//
// Of verdryx it imports only the leaf utilities internal/hugepage
// (Symbols can ask for huge pages) and internal/strictjson, so every
// other package can import it.
package calls
