package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/evalreq"
)

// evalFile is one of Options.EvalRequestFiles, read and checked once.
type evalFile struct {
	path string
	raw  []byte          // the bytes published on the eval subject
	req  evalreq.Request // raw decoded
}

// readEvalFile reads the eval-request file path and refuses it, naming
// the option and the file, when it is empty, not one JSON object, does
// not decode strictly, or would be refused by a worker with these roots
// and allowed models (evalreq.Validate). It is the only check of a
// request file: the worker publishes and reports what it returns.
func readEvalFile(path string, roots confine.Roots, allowed []string) (evalFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return evalFile{}, fmt.Errorf("Options.EvalRequestFiles: %w", err)
	}
	trimmed := bytes.TrimSpace(raw)
	switch {
	case len(trimmed) == 0:
		return evalFile{}, fmt.Errorf("Options.EvalRequestFiles %s: the file is empty (want one eval-request JSON object)", path)
	case !json.Valid(raw) || trimmed[0] != '{':
		var v map[string]any
		return evalFile{}, fmt.Errorf("Options.EvalRequestFiles %s: not one JSON object: %v", path, json.Unmarshal(raw, &v))
	}
	req, err := evalreq.Decode(raw)
	if err != nil {
		return evalFile{}, fmt.Errorf("Options.EvalRequestFiles %s: %w", path, err)
	}
	if _, err := evalreq.Validate(req, roots, allowed); err != nil {
		return evalFile{}, fmt.Errorf("Options.EvalRequestFiles %s: the worker would refuse it: %w (eval_set_path resolves under Options.Roots: %s)",
			path, err, strings.Join(roots, ", "))
	}
	return evalFile{path: path, raw: raw, req: req}, nil
}
