// Package hashembed is the offline embedder: feature hashing of words,
// word pairs and word pieces into signed buckets, no network, no weights.
// It also holds the tokenizer and stopword list the offline retrieval and
// generator share with it.
package hashembed

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode"

	"github.com/verdryx/verdryx/index"
)

// hashEmbedderName is the Name of the offline feature-hashing embedder.
const hashEmbedderName = "offline-hash"

// DefaultDims is the output size of the offline embedder when none is given.
const DefaultDims = 1024

// Embedder is the offline deterministic embedder: it hashes word
// unigrams, word bigrams and character 3- to 5-grams of each word into a
// fixed number of signed buckets and L2-normalises the result. It needs no
// network and no weights; texts sharing words and word pieces get similar
// vectors. Common function words are skipped so they do not make every
// text look alike.
type Embedder struct {
	dims int
}

var _ index.Embedder = (*Embedder)(nil)

// New returns a hashing embedder producing dims components
// (DefaultDims when dims <= 0).
func New(dims int) *Embedder {
	if dims <= 0 {
		dims = DefaultDims
	}
	return &Embedder{dims: dims}
}

// Feature weights: whole words dominate, bigrams reward phrase order, and
// character n-grams let inflected forms (dose, dosage) meet part-way.
const (
	hashWordWeight   = 1.0
	hashBigramWeight = 0.5
	hashCharWeight   = 0.15
)

// Name returns hashEmbedderName.
func (e *Embedder) Name() string { return hashEmbedderName }

// Model encodes the algorithm version and parameters.
func (e *Embedder) Model() string {
	return fmt.Sprintf("hash-v1/d%d/w1-b2-c3..5", e.dims)
}

// Dims returns the vector length.
func (e *Embedder) Dims() int { return e.dims }

// Embed returns one unit vector per text. A text with no usable token gets
// an error, since a zero vector has no direction to search by.
func (e *Embedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	for i, t := range texts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v := e.vector(t)
		nv, err := index.Normalize(v)
		if err != nil {
			return nil, fmt.Errorf("embed text %d: no indexable tokens: %w", i, err)
		}
		out[i] = nv
	}
	return out, nil
}

func (e *Embedder) vector(text string) []float32 {
	v := make([]float32, e.dims)
	words := Tokenize(text)
	prev := ""
	for _, w := range words {
		if IsStopword(w) {
			prev = ""
			continue
		}
		e.add(v, "w:"+w, hashWordWeight)
		if prev != "" {
			e.add(v, "b:"+prev+" "+w, hashBigramWeight)
		}
		prev = w
		padded := []rune("#" + w + "#")
		for n := 3; n <= 5; n++ {
			for i := 0; i+n <= len(padded); i++ {
				e.add(v, "c:"+string(padded[i:i+n]), hashCharWeight)
			}
		}
	}
	return v
}

// add hashes feature to a bucket and a sign (signed hashing keeps collisions
// from biasing similarity upwards).
func (e *Embedder) add(v []float32, feature string, weight float32) {
	h := fnv.New64a()
	h.Write([]byte(feature))
	sum := h.Sum64()
	bucket := int(sum % uint64(e.dims))
	if sum>>63 == 1 {
		weight = -weight
	}
	v[bucket] += weight
}

// Tokenize lowercases text and splits it into runs of letters and digits.
func Tokenize(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	})
}

// IsStopword reports whether w (lowercase) is an English function word that
// carries no topic: articles, pronouns, auxiliaries, prepositions and
// question words.
func IsStopword(w string) bool {
	switch w {
	case "a", "an", "the", "and", "or", "but", "of", "to", "in", "on", "at", "by",
		"for", "with", "from", "into", "as", "is", "are", "was", "were", "be", "been",
		"being", "it", "its", "this", "that", "these", "those", "there", "their",
		"what", "which", "who", "whom", "whose", "when", "where", "why", "how",
		"do", "does", "did", "can", "could", "may", "might", "must", "shall",
		"should", "will", "would", "has", "have", "had", "any", "some", "i", "you",
		"we", "they", "he", "she", "them", "me", "my", "our", "your", "under",
		"per", "according", "about", "if", "so", "than", "then", "not", "no":
		return true
	}
	return false
}
