package golden

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/verdryx/verdryx/rag"
)

func TestParseQuantities(t *testing.T) {
	u := newUnits(map[string][]string{"moon-phase": {"mp"}})
	u.observe(rag.Corpus{Entries: []rag.Entry{{ID: "a", Text: "A shadeglass orchid may be harvested after 7 moon-phases."}}})
	for _, tc := range []struct {
		text string
		want []string // Quantity.String() of each
	}{
		{"4 pints", []string{"4 pint"}},
		{"four pints", []string{"4 pint"}},
		{"a 4-pint jug", []string{"4 pint"}},
		{"4pt", []string{"4 pint"}},
		{"3h", []string{"3 hour"}},
		{"a 3-hour wait", []string{"3 hour"}},
		{"three-hour", []string{"3 hour"}},
		{"a dozen grains", []string{"12 grain"}},
		{"half a pint", []string{"0.5 pint"}},
		{"one and a half hours", []string{"1.5 hour"}},
		{"twenty-one drams", []string{"21 dram"}},
		{"two hundred and five hours", []string{"205 hour"}},
		{"three thousand four hundred grains", []string{"3400 grain"}},
		{"1,000 hours", []string{"1000 hour"}},
		{"1,5 grains", []string{"1.5 grain"}},
		{"1.25 bar", []string{"1.25 bar"}},
		{"３ drams", []string{"3 dram"}},
		{"1/2 pint", []string{"0.5 pint"}},
		{"seven moon-phases", []string{"7 moonphase"}},
		{"7mp", []string{"7 moonphase"}},
		{"40 burning hours", []string{"40 hour"}},
		{"12 newton-metres", []string{"12 newtonmetre"}},
		{"12 Nm", []string{"12 newtonmetre"}},
		{"Mohs hardness 8.", []string{"8"}},
		{"3 dozen eggs", []string{"36 egg"}},
		{".5 litres", []string{"0.5 litre"}},
		{"takes .75 l", []string{"0.75 litre"}},
		{"١٢ hours", []string{"12 hour"}}, // Arabic-Indic digits
		{"१२ hours", []string{"12 hour"}}, // Devanagari digits
		{"1\u200b2 hours", []string{"12 hour"}},
		{"1\u00ad2 hours", []string{"12 hour"}},
		{"no one knows; one of them", nil},
		{"M2, A-7, IV-a, 3rd, v2, 2-b", nil},
	} {
		var got []string
		for _, q := range u.parse(foldText(tc.text).s) {
			got = append(got, q.String())
		}
		assert.Equal(t, tc.want, got, tc.text)
	}
}

func TestKey(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"GRIM-AMBER", "grim-amber", true},
		{"GRIM-AMBER", "GRIM-АMBER", true}, // Cyrillic А
		{"GRIM-AMBER", "GRIM AMBER", true},
		{"amber glass", "АMBЕR GLАSS", true},
		{"moonflower", "Мoonflower", true}, // Cyrillic capital М
		{"10 drams", "1O drams", true},
		{"GRIM", "GRІM", true},                       // Cyrillic capital І
		{"KILN-TENMOKU", "KILN-TEN\u00adMOKU", true}, // soft hyphen
		{"KILN-TENMOKU", "KILN-TEN\u200bMOKU", true}, // zero-width space
		{"KILN-TENMOKU", "KILN\u2060-TENMOKU", true}, // word joiner
		{"in oxidation", "in\u200f oxidation", true}, // right-to-left mark
		{"throwing slip", "throw\u200c\u200ding\ufeff slip", true},
		{"12 hours", "١٢ hours", true},
		{"12 hours", "१२ hours", true},
		{"12 hours", "13 hours", false},
		{"heated", "unheated", false},
		{"amber", "umber", false},
	} {
		assert.Equal(t, tc.same, Key(tc.a) == Key(tc.b), "%q vs %q", tc.a, tc.b)
	}
	assert.True(t, lookalike("GRIM-АMBER", "GRIM-AMBER"), "mixed script")
	assert.False(t, lookalike("grim-amber", "GRIM-AMBER"), "case is no lookalike")
	assert.False(t, lookalike("GRIM AMBER", "GRIM-AMBER"), "a separator is no lookalike")
	assert.True(t, hasInvisible("GRIM\u00ad-AMBER"))
	assert.False(t, hasInvisible("GRIM‑AMBER"), "a non-breaking hyphen is visible")
}

func TestParseValues(t *testing.T) {
	u := newUnits(nil)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"twelve in the other book", []string{"12"}},
		{"(other manuals: twelve)", []string{"12"}},
		{"forty-five in iron", []string{"45"}},
		{"a dozen elsewhere", []string{"12"}},
		{"until the 12th hour", []string{"12 hour"}},
		{"until the twelfth hour", []string{"12 hour"}},
		{"the fifth day", []string{"5 day"}},
		{"the forty-fifth minute", []string{"45 minute"}},
		{"the twenty-first", []string{"21"}},
		{"the four hundredth hour", []string{"400 hour"}},
		{"the four hundred and twelfth", []string{"412"}},
		{"three quarters of a litre", []string{"0.75 litre"}},
		{"a third of an hour", []string{"0.3333333333333333 hour"}},
		{"half", []string{"0.5"}},
		{"9 hours at cone 10", []string{"9 hour", "10"}},
		// Not values: one, first, a second as a unit, words inside words.
		{"one of them came first; wait a second", nil},
		{"someone often", nil},
	} {
		var got []string
		for _, q := range u.parseValues(foldText(tc.text).s) {
			got = append(got, q.String())
		}
		assert.Equal(t, tc.want, got, tc.text)
	}
	// Numeric grounding's parse does not read bare words.
	assert.Empty(t, u.parse(foldText("two sources agree; the twelfth").s))
	assert.Equal(t, "fired at cone 6 or cone 10, often", digitizeWords("fired at cone six or cone ten, often"))
	assert.Equal(t, "cone 45; someone", digitizeWords("cone forty-five; someone"))
}
