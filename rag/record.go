package rag

import (
	"errors"
	"fmt"
	"math"
)

// Message is one generation message.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Chunk is one retrieved chunk, in rank order.
type Chunk struct {
	ID       string         `json:"id"`
	Text     string         `json:"text"`
	Metadata map[string]any `json:"metadata"`
	// Score is what ranked the chunk: its similarity under vector
	// retrieval, its reciprocal-rank-fusion score under hybrid.
	Score      float64 `json:"score"`
	Similarity float64 `json:"similarity"`
	Distance   float64 `json:"distance"`
	// Duplicates are the ids of chunks ranked below this one with exactly
	// its text (copies of one file in two places), left out of the top k.
	Duplicates []string `json:"duplicates,omitempty"`
}

// Record captures one ask end to end: what was retrieved, with which
// scores, the exact prompt bytes and the answer, and which index generation
// and corpus it came from.
type Record struct {
	Question string `json:"question"`
	// Retrieval is the retrieval mode that ranked the chunks
	// (RetrievalVector, RetrievalHybrid).
	Retrieval string `json:"retrieval,omitempty"`
	// Filter is the metadata filter the chunks were restricted to.
	Filter         Filter    `json:"filter,omitempty"`
	RetrievedIDs   []string  `json:"retrieved_ids"`
	Chunks         []Chunk   `json:"retrieved_chunks"`
	Distances      []float64 `json:"distances"`
	Similarities   []float64 `json:"similarities"`
	ContextPayload string    `json:"context_payload"`
	Messages       []Message `json:"generation_messages"`
	Answer         string    `json:"answer"`
	// IndexGeneration is the persisted generation id, or "memory:" and a
	// fingerprint prefix for an index built in memory.
	IndexGeneration string `json:"index_generation"`
	CorpusDigest    string `json:"corpus_digest"`
	Embedder        string `json:"embedder"`
	Generator       string `json:"generator"`
}

// distanceTolerance bounds |distance - (1 - similarity)|.
const distanceTolerance = 1e-12

// Validate checks the record's internal consistency without changing it:
// ranks aligned across ids, chunks, distances and similarities; every metric
// finite; similarity in [-1, 1], distance in [0, 2]; distance equal to
// 1 - similarity within 1e-12; scores non-increasing and, unless the
// retrieval is hybrid, similarities non-increasing; and non-empty question
// and answer.
func (r Record) Validate() error {
	n := len(r.RetrievedIDs)
	if n == 0 {
		return errors.New("record: no retrieved ids")
	}
	if len(r.Chunks) != n || len(r.Distances) != n || len(r.Similarities) != n {
		return fmt.Errorf("record: misaligned ranks: %d ids, %d chunks, %d distances, %d similarities",
			n, len(r.Chunks), len(r.Distances), len(r.Similarities))
	}
	for i := range n {
		c := r.Chunks[i]
		if c.ID != r.RetrievedIDs[i] {
			return fmt.Errorf("record: rank %d: chunk id %q, retrieved id %q", i, c.ID, r.RetrievedIDs[i])
		}
		s, d := r.Similarities[i], r.Distances[i]
		if math.IsNaN(s) || math.IsInf(s, 0) || math.IsNaN(d) || math.IsInf(d, 0) {
			return fmt.Errorf("record: rank %d: non-finite similarity %v or distance %v", i, s, d)
		}
		if c.Similarity != s || c.Distance != d {
			return fmt.Errorf("record: rank %d: chunk metrics (%v, %v) differ from the record's (%v, %v)", i, c.Similarity, c.Distance, s, d)
		}
		if s < -1 || s > 1 {
			return fmt.Errorf("record: rank %d: similarity %v outside [-1, 1]", i, s)
		}
		if d < 0 || d > 2 {
			return fmt.Errorf("record: rank %d: distance %v outside [0, 2]", i, d)
		}
		if math.Abs(d-(1-s)) > distanceTolerance {
			return fmt.Errorf("record: rank %d: distance %v is not 1 - similarity (%v)", i, d, 1-s)
		}
		if math.IsNaN(c.Score) || math.IsInf(c.Score, 0) {
			return fmt.Errorf("record: rank %d: non-finite score %v", i, c.Score)
		}
		if i > 0 && c.Score > r.Chunks[i-1].Score {
			return fmt.Errorf("record: rank %d: score %v above rank %d's %v", i, c.Score, i-1, r.Chunks[i-1].Score)
		}
		if i > 0 && r.Retrieval != RetrievalHybrid && s > r.Similarities[i-1] {
			return fmt.Errorf("record: rank %d: similarity %v above rank %d's %v", i, s, i-1, r.Similarities[i-1])
		}
	}
	if r.Question == "" {
		return errors.New("record: empty question")
	}
	if r.Answer == "" {
		return errors.New("record: empty answer")
	}
	return nil
}

// Abstention is the exact answer for a question the context does not
// support.
const Abstention = "INSUFFICIENT_CONTEXT"

// Cite returns the citation marker of chunk id: "[id]".
func Cite(id string) string { return "[" + id + "]" }
