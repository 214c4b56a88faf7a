package hashembed

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/index"
)

func TestEmbedder(t *testing.T) {
	e := New(512)
	texts := []string{
		"the moonpetal vapor is silver",
		"The MOONPETAL vapor, is silver!",
		"a moonflower vapor is golden",
		"harvest the orchid after seven phases",
	}
	v, err := e.Embed(context.Background(), texts)
	require.NoError(t, err)
	require.Len(t, v, 4)
	for i, x := range v {
		require.Len(t, x, 512)
		var n2 float64
		for _, c := range x {
			n2 += float64(c) * float64(c)
		}
		assert.InDelta(t, 1, n2, 2e-6, "text %d not unit", i)
	}
	sim := func(a, b []float32) float32 {
		var s float32
		for i := range a {
			s += a[i] * b[i]
		}
		return s
	}
	assert.InDelta(t, 1, sim(v[0], v[1]), 1e-6, "case and punctuation must not matter")
	assert.Greater(t, sim(v[0], v[2]), sim(v[0], v[3]), "shared words and word pieces must score higher")
	assert.Greater(t, sim(v[0], v[2]), float32(0.2))

	again, err := New(512).Embed(context.Background(), texts[:1])
	require.NoError(t, err)
	assert.Equal(t, v[0], again[0], "embedding must be deterministic")

	_, err = e.Embed(context.Background(), []string{"the of and"})
	assert.ErrorIs(t, err, index.ErrZeroVector)
	assert.NotEqual(t, New(512).Model(), New(1024).Model(), "model must encode dimensions")
}
