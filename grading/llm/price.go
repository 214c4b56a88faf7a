package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
)

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// PriceBook maps a model id prefix to its price. A key with a provider
// prefix ("openai:", "anthropic:") matches the id as the CLI names it (a
// bare id is Anthropic's: "claude-x" is "anthropic:claude-x"); a key
// without one matches the id with its provider prefix removed. The
// most specific key wins: the longest once its own provider prefix is
// removed, a provider-qualified key before a bare one of the same length,
// so "claude-sonnet-4-5" can differ from "claude-sonnet-4" and
// "openai:gpt-4o" from "gpt-4o".
type PriceBook map[string]Price

// DefaultPriceBook returns a small book of list prices for the models a judge
// is usually run with. Prices change: override with your own book when the
// dollar figure matters.
func DefaultPriceBook() PriceBook {
	return PriceBook{
		"claude-opus-4":       {InputPerMTok: 15, OutputPerMTok: 75},
		"claude-opus-4-5":     {InputPerMTok: 5, OutputPerMTok: 25},
		"claude-sonnet-4":     {InputPerMTok: 3, OutputPerMTok: 15},
		"claude-haiku-4":      {InputPerMTok: 1, OutputPerMTok: 5},
		"claude-3-5-haiku":    {InputPerMTok: 0.8, OutputPerMTok: 4},
		"gpt-4o":              {InputPerMTok: 2.5, OutputPerMTok: 10},
		"gpt-4o-mini":         {InputPerMTok: 0.15, OutputPerMTok: 0.6},
		"gpt-4.1":             {InputPerMTok: 2, OutputPerMTok: 8},
		"gpt-4.1-mini":        {InputPerMTok: 0.4, OutputPerMTok: 1.6},
		StubID:                {},
		"openai:" + StubID:    {},
		"anthropic:" + StubID: {},
	}
}

// Cost prices a call. ok is false when no prefix of model is in the book;
// the cost is then 0 and the caller should say the call was unpriced.
func (b PriceBook) Cost(model string, inputTokens, outputTokens int64) (usd float64, ok bool) {
	p, ok := b.Lookup(model)
	if !ok {
		return 0, false
	}
	return (float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok) / 1e6, true
}

// Priced reports whether model has a price in the book.
func (b PriceBook) Priced(model string) bool {
	_, ok := b.Lookup(model)
	return ok
}

// Lookup returns the price of model by the book's matching rule (see
// PriceBook); ok is false when no key matches.
func (b PriceBook) Lookup(model string) (p Price, ok bool) {
	bare := stripProvider(model)
	if bare == model && model != StubID {
		// A bare id is an Anthropic model, as the CLI resolves it (and as
		// the Anthropic adapter names itself).
		model = "anthropic:" + model
	}
	bestLen, bestQualified := -1, false
	for k, price := range b {
		kb := stripProvider(k)
		qualified := kb != k
		var match bool
		if qualified {
			match = strings.HasPrefix(model, k)
		} else {
			match = strings.HasPrefix(bare, k)
		}
		if !match {
			continue
		}
		if len(kb) > bestLen || (len(kb) == bestLen && qualified && !bestQualified) {
			p, ok, bestLen, bestQualified = price, true, len(kb), qualified
		}
	}
	return p, ok
}

func stripProvider(id string) string {
	return strings.TrimPrefix(strings.TrimPrefix(id, "anthropic:"), "openai:")
}

// priceEntry is one model's entry in a prices file; both members are
// required.
type priceEntry struct {
	Input  *float64 `json:"input_usd_per_mtok"`
	Output *float64 `json:"output_usd_per_mtok"`
}

// maxPricesFile bounds a prices file.
const maxPricesFile = 1 << 20

// LoadPrices reads a prices file and returns base overridden and extended
// by it; base is not modified (nil is an empty book). The file is one JSON
// object: model id as the CLI names it ("openai:gpt-4o-mini",
// "claude-sonnet-4-5") -> {"input_usd_per_mtok": N, "output_usd_per_mtok":
// N}, US dollars per million tokens. Decoding is strict: an unknown or
// missing member, a negative or non-finite price, an empty key or trailing
// data is an error naming the file and the model key; a key given twice in
// one object (a model, or a member of its price) is an error naming the
// line of each, never the last one silently winning.
func LoadPrices(path string, base PriceBook) (PriceBook, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("prices: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxPricesFile+1))
	if err != nil {
		return nil, fmt.Errorf("prices %s: read: %w", path, err)
	}
	if len(raw) > maxPricesFile {
		return nil, fmt.Errorf("prices %s: more than %d bytes", path, maxPricesFile)
	}
	if err := checkDuplicateKeys(raw); err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	var top map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("prices %s: want one JSON object of model id -> price: %w", path, err)
	}
	if top == nil {
		return nil, fmt.Errorf("prices %s: want one JSON object of model id -> price, have null", path)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("prices %s: trailing data after the object", path)
	}
	out := make(PriceBook, len(base)+len(top))
	for k, p := range base {
		out[k] = p
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("prices %s: an empty model id", path)
		}
		var e priceEntry
		d := json.NewDecoder(bytes.NewReader(top[k]))
		d.DisallowUnknownFields()
		if err := d.Decode(&e); err != nil {
			return nil, fmt.Errorf("prices %s: model %q: %w", path, k, err)
		}
		for _, m := range []struct {
			name string
			v    *float64
		}{{"input_usd_per_mtok", e.Input}, {"output_usd_per_mtok", e.Output}} {
			switch {
			case m.v == nil:
				return nil, fmt.Errorf("prices %s: model %q: %s is missing", path, k, m.name)
			case *m.v < 0 || math.IsNaN(*m.v) || math.IsInf(*m.v, 0):
				return nil, fmt.Errorf("prices %s: model %q: %s is %v, want a finite price >= 0", path, k, m.name, *m.v)
			}
		}
		out[k] = Price{InputPerMTok: *e.Input, OutputPerMTok: *e.Output}
	}
	return out, nil
}

// checkDuplicateKeys refuses a JSON text in which an object has a key
// twice, naming the key and the line of each. A text that is not valid
// JSON is left to the decoder to refuse (nil).
func checkDuplicateKeys(raw []byte) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	lineAt := func(off int64) int { return 1 + bytes.Count(raw[:off], []byte("\n")) }
	// Each open container: for an object, the line of each key seen and
	// whether the next token is a key.
	type frame struct {
		keys      map[string]int
		expectKey bool
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // io.EOF, or invalid JSON the decoder reports
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.keys != nil && top.expectKey {
			if key, ok := tok.(string); ok {
				line := lineAt(dec.InputOffset())
				if first, dup := top.keys[key]; dup {
					return fmt.Errorf("key %q given twice: line %d and line %d", key, first, line)
				}
				top.keys[key] = line
				top.expectKey = false
				continue
			}
		}
		if top != nil && top.keys != nil {
			top.expectKey = true // this token is the value (or the object's end)
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{keys: map[string]int{}, expectKey: true})
		case json.Delim('['):
			stack = append(stack, &frame{})
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && stack[len(stack)-1].keys != nil {
				stack[len(stack)-1].expectKey = true
			}
		}
	}
}
