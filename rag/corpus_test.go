package rag_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/rag"
)

func loadGrimoire(t *testing.T) rag.Corpus {
	t.Helper()
	c, err := rag.LoadCorpus("../testdata/grimoire/corpus.json")
	require.NoError(t, err)
	return c
}

func TestGrimoireCorpusFacts(t *testing.T) {
	c := loadGrimoire(t)
	require.Len(t, c.Entries, 8)
	// The traps live in the corpus text; pin them so a softened fixture fails.
	facts := map[string][]string{
		"moonpetal-silver-vapor":    {"11 grains", "silver sleep vapor", "ground with pearl salt"},
		"moonflower-golden-vapor":   {"17 grains", "golden waking vapor", "ground with pearl salt"},
		"verdigris-dose-verdant":    {"3 drams", "distilled in copper", "after dusk", "tarnish fever"},
		"verdigris-dose-amber":      {"9 drams", "distilled in amber glass", "at dawn", "tarnish fever"},
		"verdigris-dose-obsidian":   {"15 drams", "distilled in basalt", "during a lunar eclipse", "tarnish fever"},
		"shadeglass-orchid-harvest": {"7 moon-phases", "grown entirely in shade", "direct sun invalidates"},
		"sunspire-orchid-harvest":   {"10 moon-phases", "grown in full sun"},
		"asterquartz-powdering":     {"Mohs hardness 8", "powdered for elixirs"},
	}
	for id, want := range facts {
		e, ok := c.Entry(id)
		require.True(t, ok, id)
		for _, w := range want {
			assert.Contains(t, e.Text, w, id)
		}
		assert.Contains(t, e.Text, e.Metadata["condition"], "condition of %s must be verbatim evidence", id)
	}
}

func TestContextBlockFormat(t *testing.T) {
	c := loadGrimoire(t)
	moon, _ := c.Entry("moonpetal-silver-vapor")
	dose, _ := c.Entry("verdigris-dose-verdant")
	assert.Equal(t, "[CONTEXT id=moonpetal-silver-vapor grimoire_id='GRIM-NOCTURNE' folio='IV-a']", c.Label(moon), "string folio quoted")
	assert.Equal(t, "[CONTEXT id=verdigris-dose-verdant grimoire_id='GRIM-VERDANT' folio=21]", c.Label(dose), "integer folio bare")
	assert.Equal(t, "[CONTEXT id=verdigris-dose-verdant grimoire_id='GRIM-VERDANT' folio=21]\n"+dose.Text+"\n[END CONTEXT id=verdigris-dose-verdant]", c.Block(dose))

	l, err := rag.LoadCorpus("../testdata/lighthouse/corpus.json")
	require.NoError(t, err)
	rail, _ := l.Entry("gallery-rail-paint")
	assert.Equal(t, "[CONTEXT id=gallery-rail-paint manual_id=null page='appendix-2']", l.Label(rail), "declared label fields, null rendered")
}

func TestCorpusDigest(t *testing.T) {
	c := loadGrimoire(t)
	d := c.Digest()
	assert.Regexp(t, `^sha256:[0-9a-f]{64}$`, d)
	c2 := loadGrimoire(t)
	c2.Entries[3].Text += " "
	assert.NotEqual(t, d, c2.Digest(), "text change must change the digest")
	c3 := loadGrimoire(t)
	c3.Entries[3].Metadata["folio"] = int64(99)
	assert.NotEqual(t, d, c3.Digest(), "metadata change must change the digest")
}

func TestLoadCorpusErrors(t *testing.T) {
	const head = `{"id":"c","label_fields":["src","folio"],"source_field":"src","subject_field":"subject","entries":[`
	for _, tc := range []struct {
		name, json, want string
	}{
		{"no entries", head + `]}`, `field "entries": the corpus has no entries`},
		{"missing id", head + `{"text":"t","src":"S","subject":"x"}]}`, `entries[0]: field "id": must be a non-blank string`},
		{"blank text", head + `{"id":"a","text":"  ","src":"S","subject":"x"}]}`, `entries[0] (id "a"): field "text"`},
		{"duplicate id", head + `{"id":"a","text":"t","src":"S","subject":"x"},{"id":"a","text":"u","src":"S","subject":"x"}]}`, `entries[1] (id "a"): field "id": repeats entries[0]`},
		{"no label", head + `{"id":"a","text":"t","src":null,"subject":"x"}]}`, `entries[0] (id "a"): at least one of the label fields [src folio] must be non-null`},
		{"float folio", head + `{"id":"a","text":"t","src":"S","folio":2.5,"subject":"x"}]}`, `entries[0] (id "a"): field "folio": label value must be a string, an integer or null`},
		{"quote in label", head + `{"id":"a","text":"t","src":"S'x","subject":"x"}]}`, `field "src": label string`},
		{"missing subject", head + `{"id":"a","text":"t","src":"S"}]}`, `entries[0] (id "a"): field "subject"`},
		{"bracket in id", head + `{"id":"a]b","text":"t","src":"S","subject":"x"}]}`, `field "id": must not contain brackets`},
		{"source not a label", `{"id":"c","label_fields":["folio"],"source_field":"src","entries":[]}`, `field "source_field": "src" is not one of label_fields`},
		{"unknown member", `{"id":"c","labels":["x"]}`, `unknown field "labels"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "corpus.json")
			require.NoError(t, os.WriteFile(path, []byte(tc.json), 0o644))
			_, err := rag.LoadCorpus(path)
			require.Error(t, err)
			assert.True(t, strings.HasPrefix(err.Error(), path+": "), "error must name the file: %v", err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
