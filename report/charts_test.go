package report

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/outcome"
)

// TestSLOChartMarksClippedBars: a budget below the axis's floor gets a bar
// cut at the floor, classed clipped, with a clip marker and its true value
// in its label and title; budgets the axis holds get neither.
func TestSLOChartMarksClippedBars(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	ind := func(sli string, budget float64) outcome.Indicator {
		return outcome.Indicator{SLI: sli, Target: 0.99, Measured: true, Events: 100,
			Observed: f(0.5), BudgetRemaining: f(budget), BurnRate: f(3), Trigger: "burn"}
	}
	rep := &outcome.SLOReport{Subjects: []outcome.SubjectSLO{{Subject: "fleet", Indicators: []outcome.Indicator{
		ind("quality", -12.34), ind("containment", -3), ind("cost", 0.5), ind("latency", sloFloor),
	}}}}
	c, err := sloChart(rep)
	require.NoError(t, err)
	require.Equal(t, 4, c.Counts[KindSLOBar])
	require.Equal(t, 1, c.Counts[KindSLOClip], "one clip marker, for the one budget below the floor")
	bars := regexp.MustCompile(`<rect class="mark slo-bar[^"]*"[^>]*><title>[^<]*</title>`).FindAllString(c.SVG, -1)
	require.Len(t, bars, 4)
	var clipped []string
	for _, b := range bars {
		if strings.Contains(b, "slo-bar clipped") {
			clipped = append(clipped, b)
		}
	}
	require.Len(t, clipped, 1)
	require.Contains(t, clipped[0], "bar clipped at -5: the budget is -12.34")
	require.Contains(t, c.SVG, "budget -12.34 (bar clipped at -5)", "the label beside the bar")
	require.NotContains(t, sloLabel(ind("x", -3)), "clipped")
	require.NotContains(t, sloLabel(ind("x", sloFloor)), "clipped")
}
