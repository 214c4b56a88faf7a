package segment

import "github.com/verdryx/verdryx/calls"

// readBytes is Read over a segment's bytes.
func readBytes(name string, b []byte, fn func(calls.Call) error) error {
	runs, syms := calls.NewSymbols(), calls.NewSymbols()
	sc := NewScanner(calls.AllFields, runs, syms)
	return sc.ScanBytes(name, b, func(batch *calls.Batch) error {
		for i := range batch.Len {
			if err := fn(batch.Call(i, runs, syms)); err != nil {
				return err
			}
		}
		return nil
	})
}
