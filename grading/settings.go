package grading

import (
	"fmt"
	"strconv"
	"strings"
)

// Settings are a run's settings that change its scores, beside the model
// under evaluation and the eval set (which the drift window already keys
// on). A setting that played no part in the run is left empty: a set
// without llm_judge cases records no judge, one without rag cases no
// index or retrieval. Two runs are comparable when their Settings are
// equal (Diff is empty). A run that records none (Run.Settings nil: the
// Python verdryx's runs, and runs stored before settings were recorded)
// is comparable only with another such run.
type Settings struct {
	// Judge is the model that graded the llm_judge cases.
	Judge string `json:"judge,omitempty"`
	// SemanticJudge and SemanticThreshold are the faithfulness and
	// answer_relevance checks' judge and passing score, set when the rag
	// cases had them (--semantic or "semantic": true).
	SemanticJudge     string  `json:"semantic_judge,omitempty"`
	SemanticThreshold float64 `json:"semantic_threshold,omitempty"`
	// IndexGeneration, Embedder, Retrieval, TopK and Generator describe
	// the rag pipeline that answered the rag cases.
	IndexGeneration string `json:"index_generation,omitempty"`
	Embedder        string `json:"embedder,omitempty"`
	Retrieval       string `json:"retrieval,omitempty"`
	TopK            int    `json:"top_k,omitempty"`
	Generator       string `json:"generator,omitempty"`
	// TypedTemplate is typryx's template that graded the typed cases,
	// "id@version".
	TypedTemplate string `json:"typed_template,omitempty"`
}

// settingsDescriber is implemented by a RAGAsker that can describe the
// pipeline behind it (rag.Pipeline does); a RAGAsker that does not
// records only its Generation.
type settingsDescriber interface {
	Embedder() string
	// Describe returns the retrieval mode, the chunks retrieved per ask
	// and the generator's name.
	Describe() (retrieval string, topK int, generator string)
}

// fields lists the settings as name and value, in a fixed order, empty
// values included.
func (s Settings) fields() [][2]string {
	thr := ""
	if s.SemanticThreshold != 0 {
		thr = strconv.FormatFloat(s.SemanticThreshold, 'g', -1, 64)
	}
	topK := ""
	if s.TopK != 0 {
		topK = strconv.Itoa(s.TopK)
	}
	return [][2]string{
		{"judge", s.Judge},
		{"semantic_judge", s.SemanticJudge},
		{"semantic_threshold", thr},
		{"index_generation", s.IndexGeneration},
		{"embedder", s.Embedder},
		{"retrieval", s.Retrieval},
		{"top_k", topK},
		{"generator", s.Generator},
		{"typed_template", s.TypedTemplate},
	}
}

// pairs returns the settings that are set as "name=value", in a fixed
// order.
func (s Settings) pairs() []string {
	var out []string
	for _, f := range s.fields() {
		if f[1] != "" {
			out = append(out, f[0]+"="+f[1])
		}
	}
	return out
}

// SettingsText is a one-line form of a run's settings: "none" when the
// run used none of them, "not recorded" when s is nil; compact, with short
// names (judge, sem, idx, emb, ret, k, gen, typed) and the index
// generation cut to 16 characters, for one line of a listing.
func SettingsText(s *Settings, compact bool) string {
	switch {
	case s == nil:
		return "not recorded"
	case len(s.pairs()) == 0:
		return "none"
	case !compact:
		return strings.Join(s.pairs(), " ")
	}
	short := map[string]string{"judge": "judge", "semantic_judge": "sem", "semantic_threshold": "sem@",
		"index_generation": "idx", "embedder": "emb", "retrieval": "ret", "top_k": "k", "generator": "gen", "typed_template": "typed"}
	var out []string
	for _, f := range s.fields() {
		v := f[1]
		if v == "" {
			continue
		}
		if f[0] == "index_generation" && len(v) > 16 {
			v = v[:16]
		}
		out = append(out, short[f[0]]+"="+v)
	}
	return strings.Join(out, " ")
}

// DiffSettings names each setting that differs between a (the reference,
// e.g. a drift baseline's run) and b, as "name a -> b" ("(none)" for a
// setting one side did not use); a nil side is "settings not recorded".
// Empty means the runs were graded alike.
func DiffSettings(a, b *Settings) []string {
	switch {
	case a == nil && b == nil:
		return nil
	case a == nil:
		return []string{"settings not recorded -> recorded"}
	case b == nil:
		return []string{"settings recorded -> not recorded"}
	}
	fa, fb := a.fields(), b.fields()
	var out []string
	for i := range fa {
		if fa[i][1] != fb[i][1] {
			out = append(out, fmt.Sprintf("%s %s -> %s", fa[i][0], orNone(fa[i][1]), orNone(fb[i][1])))
		}
	}
	return out
}

func orNone(v string) string {
	if v == "" {
		return "(none)"
	}
	return v
}
