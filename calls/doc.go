// Package calls is the call schema every layer speaks: Record, the one
// per-call record type of every path (an NDJSON line, an element of a JSON
// array, a CSV row, a trace message, a tailed line); Call, a record's
// resolved value (Record.Call, and a Batch row's, Batch.Call); Batch, the
// column form of many calls, with its string tables (Symbols); the segment
// columns (Field, FieldSet, the Col* names) and decision classes. Records
// are read by ScanRecordsFile and ScanRecords (NDJSON, a JSON array, CSV)
// and decoded one message at a time by DecodeRecord, all through
// RecordDecoder, the one strict decoder of a record; its reference and
// error wording is internal/strictjson (the strict encoding/json decoding
// eval requests and asks use too). It reduces nothing: outcome does.
//
// Of verdryx it imports only the leaf utilities internal/hugepage
// (Symbols can ask for huge pages) and internal/strictjson, so every
// other package can import it.
package calls
