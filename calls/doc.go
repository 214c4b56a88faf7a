// Package calls is the call schema every layer speaks: a TokenFuse call
// (Call) and its record form (CallRecord), the segment columns (Field,
// FieldSet, the Col* names), column batches (Batch) with their string
// tables (Symbols), decision classes, and the NDJSON and CSV record
// readers. It reduces nothing: outcome does.
//
// The package imports nothing else of verdryx but strictjson, the strict
// JSON decoder its record readers share with the worker (itself a leaf).
package calls
