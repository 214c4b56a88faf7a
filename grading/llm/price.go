package llm

import (
	"sort"
	"strings"
)

// Price is a model's list price in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// PriceBook maps a model id prefix to its price. The longest matching
// prefix wins, so "claude-sonnet-4-5" can differ from "claude-sonnet-4".
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
	model = strings.TrimPrefix(strings.TrimPrefix(model, "anthropic:"), "openai:")
	keys := make([]string, 0, len(b))
	for k := range b {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(keys[i]) > len(keys[j]) })
	for _, k := range keys {
		if strings.HasPrefix(model, k) {
			p := b[k]
			return (float64(inputTokens)*p.InputPerMTok + float64(outputTokens)*p.OutputPerMTok) / 1e6, true
		}
	}
	return 0, false
}
