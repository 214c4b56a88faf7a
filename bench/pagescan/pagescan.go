// Package pagescan is the floor `verdryx bench traces` and BenchmarkPageScan
// measure a reduction against. It is benchmark harness, not an input: the
// segment reader verdryx runs on is package segment.
package pagescan

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding"

	"github.com/verdryx/verdryx/calls"
	"github.com/verdryx/verdryx/segment"
)

// ScanRowGroup reads every page of the given columns of row group gi
// of a segment and folds each value (or dictionary index) into a
// checksum, doing nothing else. It returns the rows scanned and the
// checksum (so the work cannot be optimised away): the unit of a parallel scan.
func ScanRowGroup(path string, fields calls.FieldSet, gi int) (rows int64, sum uint64, err error) {
	return scan(path, fields, gi)
}

// scan scans row group only, or every row group when only < 0.
func scan(path string, fields calls.FieldSet, only int) (rows int64, sum uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, fmt.Errorf("open segment: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, fmt.Errorf("stat segment: %w", err)
	}
	pf, err := segment.OpenParquet(f, st.Size())
	if err != nil {
		return 0, 0, fmt.Errorf("segment %s: %w", path, err)
	}
	var cols []int
	for fl := range calls.NumFields {
		if fields.Has(fl) {
			if leaf, ok := pf.Schema().Lookup(fl.Name()); ok {
				cols = append(cols, leaf.ColumnIndex)
			}
		}
	}
	rgs := pf.RowGroups()
	if only >= len(rgs) {
		return 0, 0, fmt.Errorf("segment %s: no row group %d", path, only)
	}
	for gi, rg := range rgs {
		if only >= 0 && gi != only {
			continue
		}
		rows += rg.NumRows()
		chunks := rg.ColumnChunks()
		for _, ci := range cols {
			pages := chunks[ci].Pages()
			for {
				p, err := pages.ReadPage()
				if err != nil {
					pages.Close()
					if errors.Is(err, io.EOF) {
						break
					}
					return rows, sum, fmt.Errorf("segment %s: column %d: %w", path, ci, err)
				}
				v := p.Data()
				switch v.Kind() {
				case encoding.Int64:
					for _, x := range v.Int64() {
						sum += uint64(x)
					}
				case encoding.Int32:
					for _, x := range v.Int32() {
						sum += uint64(x)
					}
				case encoding.ByteArray:
					_, offs := v.ByteArray()
					sum += uint64(len(offs))
				}
				parquet.Release(p)
			}
		}
	}
	return rows, sum, nil
}
