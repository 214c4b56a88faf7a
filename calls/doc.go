// Package calls is the call schema every layer speaks: a TokenFuse call
// (Call) and its record form (CallRecord), the segment columns (Field,
// FieldSet, the Col* names), column batches (Batch) with their string
// tables (Symbols), decision classes, and the NDJSON and CSV record
// readers, and DecodeStrict, the strict JSON decoder the record readers
// share with the worker's request decoders. It reduces nothing: outcome
// does.
//
// The package imports nothing else of verdryx.
package calls
