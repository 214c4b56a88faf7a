package docs

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index/hashembed"
	"github.com/verdryx/verdryx/rag"
)

// TestChunksRetrieveTheirSection asks the folder of our own making the
// questions a reader would ask of each section, with the offline
// embedder, chunks of at most 60 tokens (more than 12 of them) and the
// top 3 chunks: the chunk holding the answer (its text
// holds the answer's words) is retrieved for every one. It is evidence
// that the chunks serve retrieval; the structural rules have their own
// tests above.
func TestChunksRetrieveTheirSection(t *testing.T) {
	res := load(t, manual, Options{ChunkTokens: 60, ChunkOverlap: 10})
	require.Greater(t, len(res.Corpus.Entries), 12)
	p, err := rag.Build(context.Background(), res.Corpus, hashembed.New(0), rag.NewExtractive(0), rag.Options{TopK: 3})
	require.NoError(t, err)
	for _, q := range []struct{ question, answer string }{
		{"Which kernel version does a Linux host need for the lock service?", "kernel 5.10"},
		{"How much memory is needed per 10,000 leases?", "2 GiB of memory"},
		{"Which TCP port must be open between the nodes?", "TCP port 7420"},
		{"Where do I unpack the archive when installing on Linux?", "/opt/locks"},
		{"Can locks init run as root?", "refuses to run as root"},
		{"How long may mixed versions run together during an upgrade?", "seven days"},
		{"Where is the upgrade log written?", "upgrade.log"},
		{"Are Windows hosts supported for production?", "not supported for production"},
		{"How long does a lease last unless renewed?", "30 seconds"},
		{"What grace period applies before an expired lease is released?", "grace period of 5 seconds"},
		{"How many leases can one node hold?", "50,000 leases"},
		{"Which port do clients connect on?", "port 7421"},
		{"Which version added lease renewal batching?", "Version 2.4"},
		{"Which release first had fencing tokens?", "Version 2.2"},
	} {
		rec, err := p.Ask(context.Background(), q.question)
		require.NoError(t, err)
		found := false
		var ids []string
		for _, c := range rec.Chunks {
			ids = append(ids, c.ID)
			found = found || strings.Contains(c.Text, q.answer)
		}
		if !found {
			t.Errorf("%q: no retrieved chunk holds %q (retrieved %v)", q.question, q.answer, ids)
		}
	}
}
