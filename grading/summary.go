package grading

import "encoding/json"

// RunSummary is a run with its derived figures, as printed by --json and
// replied to requesters.
type RunSummary struct {
	Run
	Cases      int `json:"case_count"`
	GradedN    int `json:"graded"`
	Unanswered int `json:"unmeasured"`
	// MeanScore is nil when no case was graded ("unmeasured").
	MeanScore    *float64 `json:"mean_score"`
	TotalTokens  int64    `json:"total_tokens"`
	TotalCostUSD float64  `json:"total_cost_usd"`
	// Typed counts the typed cases asked, answered and unanswered (with
	// typryx's reasons and answer ids) and the labels posted; nil when no
	// typed case was asked.
	Typed *TypedSummary `json:"typed,omitempty"`
	// Unpriced lists the models called that have no price: their calls
	// are counted as $0 in TotalCostUSD, never silently.
	Unpriced []string `json:"unpriced,omitempty"`
	// CostLimitUSD is the run's cap (0: none); StoppedAtCase the first
	// case the cap left unmeasured, CostLimited how many it did. The
	// detail is Provenance.CostLimit.
	CostLimitUSD  float64 `json:"cost_limit_usd,omitempty"`
	StoppedAtCase string  `json:"stopped_at_case,omitempty"`
	CostLimited   int     `json:"cost_limited,omitempty"`
}

// Summarize derives a run's summary.
func Summarize(run Run) RunSummary {
	s := RunSummary{Run: run, Cases: len(run.Scores)}
	s.GradedN = len(run.Graded())
	s.Unanswered = s.Cases - s.GradedN
	if m, ok := run.Mean(); ok {
		s.MeanScore = &m
	}
	s.TotalTokens, s.TotalCostUSD = run.totals()
	s.Typed = summarizeTyped(run.Scores)
	s.Unpriced = run.Provenance.Unpriced
	if cl := run.Provenance.CostLimit; cl != nil {
		s.CostLimitUSD, s.StoppedAtCase, s.CostLimited = cl.LimitUSD, cl.StoppedAtCase, cl.StoppedCases
	}
	return s
}

// EvalRunData is the data of an eval_run envelope: the contract keys plus
// the run's provenance. mean_score is null for an unmeasured run.
// unanswered counts every case not graded, typed cases typryx left
// unanswered included; typed (present when typed cases were asked) counts
// those asked, answered and unanswered by reason, and the labels posted.
func EvalRunData(s RunSummary) map[string]any {
	var mean any
	if s.MeanScore != nil {
		mean = *s.MeanScore
	}
	d := map[string]any{
		"model":           s.Model,
		"cases":           s.Cases,
		"mean_score":      mean,
		"total_tokens":    s.TotalTokens,
		"total_cost_usd":  s.TotalCostUSD,
		"unanswered":      s.Unanswered,
		"eval_set_id":     s.EvalSetID,
		"eval_set_digest": s.EvalSetDigest,
		"verdryx_version": s.Version,
	}
	if s.Judge != "" {
		d["judge"] = s.Judge
	}
	if s.Provenance.CorpusDigest != "" {
		d["corpus_digest"] = s.Provenance.CorpusDigest
	}
	if s.Provenance.IndexGeneration != "" {
		d["index_generation"] = s.Provenance.IndexGeneration
	}
	if len(s.Unpriced) > 0 {
		d["unpriced"] = s.Unpriced
	}
	if s.CostLimitUSD > 0 {
		d["cost_limit_usd"] = s.CostLimitUSD
		d["cost_limited"] = s.CostLimited
		if s.StoppedAtCase != "" {
			d["stopped_at_case"] = s.StoppedAtCase
		}
	}
	if s.Typed != nil {
		t := *s.Typed
		t.UnansweredCases = nil // the event counts; the stored run lists them
		if raw, err := json.Marshal(t); err == nil {
			d["typed"] = json.RawMessage(raw)
		}
	}
	if len(s.Provenance.Graders) > 0 {
		raw, err := json.Marshal(s.Provenance.Graders)
		if err == nil {
			d["graders"] = json.RawMessage(raw)
		}
	}
	return d
}
