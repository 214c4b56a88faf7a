package pagescan

import "github.com/verdryx/verdryx/calls"

// scanAll reads every page of the given columns of a segment and folds each
// value (or dictionary index) into a checksum, doing nothing else. It
// returns the rows scanned and the checksum (so the work cannot be
// optimised away).
func scanAll(path string, fields calls.FieldSet) (rows int64, sum uint64, err error) {
	return scan(path, fields, -1)
}
