package evalreq

import (
	"fmt"

	"github.com/verdryx/verdryx/confine"
	"github.com/verdryx/verdryx/envelope"
	"github.com/verdryx/verdryx/grading/evalrun"
	"github.com/verdryx/verdryx/internal/strictjson"
)

// checkAgentID validates an agent_id where it enters: empty (unset) or the
// contract's canonical agent:// form.
func checkAgentID(id string) error {
	if id == "" || envelope.ValidAgentID(id) {
		return nil
	}
	return fmt.Errorf("field agent_id: %q does not match ^agent://[a-z0-9.-]+/[a-z0-9._/-]+$ (max 255 bytes)", id)
}

// Decode decodes an eval-request message strictly: unknown
// fields and trailing data are errors, agent_id must be canonical.
func Decode(data []byte) (Request, error) {
	var req Request
	if err := strictjson.Decode(data, &req); err != nil {
		return req, err
	}
	return req, checkAgentID(req.AgentID)
}

// files returns the confined reader of an eval handler: Files, or one over
// Roots with the default limits.
func (h *Handler) files() *confine.Reader {
	if h.opts.Files != nil {
		return h.opts.Files
	}
	return &confine.Reader{Roots: h.opts.Roots}
}

// confinedDeps returns the grading deps with every file read confined.
func (h *Handler) confinedDeps() evalrun.Deps {
	d := h.deps
	d.ReadFile = h.files().ReadFile
	return d
}
