package calls

import "io"

// Test-only forms of the zero-copy decoder, kept here so the package
// exports only what production reads with.

// callRecord returns the allocated form of r: what DecodeStrict would have
// decoded from the same line.
func (r *Record) callRecord() CallRecord {
	var rec CallRecord
	r.fill(&rec)
	return rec
}

// newRecordDecoder returns a decoder that also accepts the string keys
// ext (at most MaxExt), decoded into Record.Ext in that order.
func newRecordDecoder(ext ...string) *RecordDecoder {
	if len(ext) > MaxExt {
		panic("calls: newRecordDecoder: more than MaxExt extra keys")
	}
	return &RecordDecoder{ext: ext}
}

// readNDJSON is ScanNDJSON with each record in its allocated form.
func readNDJSON(src io.Reader, name string, fn func(*CallRecord) error) error {
	return ScanNDJSON(src, name, func(r *Record) error {
		rec := r.callRecord()
		return fn(&rec)
	})
}
