package rag

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseQuantities(t *testing.T) {
	u := newUnits(map[string][]string{"moon-phase": {"mp"}})
	u.observe([]string{"A shadeglass orchid may be harvested after 7 moon-phases."})
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
		{"GRIM", "GRІM", true}, // Cyrillic capital І
		{"heated", "unheated", false},
		{"amber", "umber", false},
	} {
		assert.Equal(t, tc.same, Key(tc.a) == Key(tc.b), "%q vs %q", tc.a, tc.b)
	}
	assert.True(t, lookalike("GRIM-АMBER", "GRIM-AMBER"), "mixed script")
	assert.False(t, lookalike("grim-amber", "GRIM-AMBER"), "case is no lookalike")
	assert.False(t, lookalike("GRIM AMBER", "GRIM-AMBER"), "a separator is no lookalike")
}
