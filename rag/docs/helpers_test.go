package docs

import "github.com/verdryx/verdryx/rag"

// loadDir walks the documents under dir and returns the result with the
// chunks collected as its Corpus.
func loadDir(dir string, opts Options) (Result, error) {
	w, err := NewWalker(dir, opts)
	if err != nil {
		return Result{}, err
	}
	c := w.Schema()
	res, err := w.Walk(func(e rag.Entry) error {
		c.Entries = append(c.Entries, e)
		return nil
	})
	if err != nil {
		return Result{}, err
	}
	res.Corpus = c
	return res, nil
}
