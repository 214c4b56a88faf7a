package llm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writePrices(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prices.json")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestLoadPricesOverridesAndExtends(t *testing.T) {
	base := DefaultPriceBook()
	p := writePrices(t, `{
  "gpt-4o-mini": {"input_usd_per_mtok": 0.2, "output_usd_per_mtok": 0.8},
  "openai:llama-3.1-70b": {"input_usd_per_mtok": 0.6, "output_usd_per_mtok": 0.6},
  "claude-sonnet-4-5": {"input_usd_per_mtok": 3, "output_usd_per_mtok": 15}
}`)
	book, err := LoadPrices(p, base)
	require.NoError(t, err)
	usd, ok := book.Cost("openai:gpt-4o-mini", 1_000_000, 1_000_000)
	require.True(t, ok)
	assert.InDelta(t, 1.0, usd, 1e-12, "the file overrides the built-in price")
	usd, ok = book.Cost("openai:llama-3.1-70b", 1_000_000, 0)
	require.True(t, ok)
	assert.InDelta(t, 0.6, usd, 1e-12, "the file extends the book")
	_, ok = book.Cost("anthropic:llama-3.1-70b", 1, 1)
	assert.False(t, ok, "a provider-qualified key prices only that provider's model")
	usd, ok = book.Cost("gpt-4o", 1_000_000, 0)
	require.True(t, ok)
	assert.InDelta(t, 2.5, usd, 1e-12, "the rest of the built-in book stays")
	assert.InDelta(t, 0.15, base["gpt-4o-mini"].InputPerMTok, 1e-12, "the base book is not modified")
	_, ok = book.Cost("openai:unlisted", 1, 1)
	assert.False(t, ok)
}

func TestPriceBookMostSpecificKeyWins(t *testing.T) {
	b := PriceBook{
		"gpt-4o":        {InputPerMTok: 1},
		"gpt-4o-mini":   {InputPerMTok: 2},
		"openai:gpt-4o": {InputPerMTok: 3},
	}
	p, ok := b.Lookup("openai:gpt-4o-mini")
	require.True(t, ok)
	assert.Equal(t, 2.0, p.InputPerMTok, "the longer bare key is more specific than a shorter qualified one")
	p, _ = b.Lookup("openai:gpt-4o-2024-08-06")
	assert.Equal(t, 3.0, p.InputPerMTok, "a qualified key wins over a bare key of the same length")
	p, _ = b.Lookup("gpt-4o-2024-08-06")
	assert.Equal(t, 1.0, p.InputPerMTok, "a bare id is Anthropic's: the openai: key does not price it")
	b["anthropic:acme"] = Price{InputPerMTok: 4}
	p, _ = b.Lookup("acme-1")
	assert.Equal(t, 4.0, p.InputPerMTok, "an anthropic: key prices the bare id the Anthropic adapter reports")
	p, _ = b.Lookup("anthropic:acme-1")
	assert.Equal(t, 4.0, p.InputPerMTok)
}

func TestLoadPricesRefusesBadFiles(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"not an object":  {`[1, 2]`, "want one JSON object"},
		"null":           {`null`, "have null"},
		"trailing data":  {`{} {}`, "trailing data"},
		"unknown member": {`{"m": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1, "cached_usd_per_mtok": 1}}`, `model "m"`},
		"missing member": {`{"m": {"input_usd_per_mtok": 1}}`, `model "m": output_usd_per_mtok is missing`},
		"negative":       {`{"m": {"input_usd_per_mtok": -1, "output_usd_per_mtok": 1}}`, `model "m": input_usd_per_mtok is -1`},
		"not finite":     {`{"m": {"input_usd_per_mtok": 1e400, "output_usd_per_mtok": 1}}`, `model "m"`},
		"a string":       {`{"m": {"input_usd_per_mtok": "1", "output_usd_per_mtok": 1}}`, `model "m"`},
		"empty id":       {`{"": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}`, "empty model id"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := writePrices(t, c.body)
			_, err := LoadPrices(p, DefaultPriceBook())
			require.Error(t, err)
			assert.Contains(t, err.Error(), p, "the error names the file")
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := LoadPrices(filepath.Join(t.TempDir(), "none.json"), nil)
	require.Error(t, err)
}

// TestLoadPricesRefusesAKeyGivenTwice: a model priced twice (1, then 0)
// used to keep the last price, which switched a cost cap off.
func TestLoadPricesRefusesAKeyGivenTwice(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"model": {"{\n  \"openai:m\": {\"input_usd_per_mtok\": 1, \"output_usd_per_mtok\": 1},\n  \"x\": {\"input_usd_per_mtok\": 1, \"output_usd_per_mtok\": 1},\n  \"openai:m\": {\"input_usd_per_mtok\": 0, \"output_usd_per_mtok\": 0}\n}",
			`key "openai:m" given twice: line 2 and line 4`},
		"member": {"{\"m\": {\"input_usd_per_mtok\": 1,\n \"output_usd_per_mtok\": 1,\n \"input_usd_per_mtok\": 0}}",
			`key "input_usd_per_mtok" given twice: line 1 and line 3`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := writePrices(t, c.body)
			_, err := LoadPrices(p, DefaultPriceBook())
			require.Error(t, err)
			assert.Contains(t, err.Error(), "prices "+p+": "+c.want)
		})
	}
	// The same key in two objects is not a duplicate.
	_, err := LoadPrices(writePrices(t, `{"a": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}, "b": {"input_usd_per_mtok": 1, "output_usd_per_mtok": 1}}`), nil)
	require.NoError(t, err)
	_, err = LoadPrices(filepath.Join(t.TempDir(), "none.json"), nil)
	require.Error(t, err)
}
