// Package report renders the verdryx report: one self-contained HTML page
// that shows quality over time, a cases x runs grid, cost per outcome and
// SLO error budgets, with a provenance footer.
//
// The page fetches nothing: styles are inline, there is no script, and the
// charts are inline SVG drawn with gonum.org/v1/plot (axes, ticks, grid
// lines, labels and lines). The data marks (points, CI bands, baseline
// rules, bars and cells) are drawn in the plot's own data coordinates
// (plot.Transforms) as SVG elements with a class and a <title>, so a reader
// hovers a mark to read its numbers and a test counts them in the DOM. Text
// in the SVG is <text>, so it is selectable.
//
// Colours are the Okabe-Ito palette (Okabe & Ito, "Color Universal Design",
// 2008), chosen to stay distinct for the common colour-vision deficiencies;
// every state that colour marks is also told by shape, fill or a label:
//
//	blue        #0072B2  run mean score (circle), cost bars
//	vermillion  #D55E00  failed case; significant regression (filled triangle); exhausted budget
//	orange      #E69F00  regression by threshold only, not significant (hollow triangle)
//	sky blue    #56B4E9  bootstrap 95% CI band of a drift check
//	green       #009E73  passed case; budget left; case_resolved bar
//	grey        #999999  unmeasured (never drawn as 0)
//	purple      #CC79A7  typed case typryx left unanswered (dashed outline; never a fail)
//	black       #000000  baseline rule (dashed), zero line
//
// "Not measured" is never drawn as 0: an unmeasured run has no point (a
// dashed grey rule marks where it ran), an unmeasured case is a grey cell,
// and an unmeasured SLO indicator has no bar but the words "not measured"
// and the reason.
package report
