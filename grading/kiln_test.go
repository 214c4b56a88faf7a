package grading_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/verdryx/verdryx/grading"
	"github.com/verdryx/verdryx/rag"
)

// The kiln corpus and answers come from an independent review of the
// golden checks on a domain no code knows (pottery manuals): wrong answers
// that must fail and right answers (near misses) that must pass, numbered
// as the review numbered them. Cases with a note are known limitations,
// left as they are and skipped.
const kilnG = "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, vented in reduction."
const kilnGT = " [glaze-fire-celadon] (manual_id: KILN-CELADON)"
const kilnR = "Raku ware is pulled from the kiln after 20 minutes when fired in a copper saggar."
const kilnRT = " [raku-pull-copper] (manual_id: KILN-RAKU-EAST)"
const kilnS = "Casting slip is aged for 2 weeks, covered in damp cloth."
const kilnST = " [slip-age-casting] (manual_id: KILN-SLIP-C)"
const kilnW = "Reclaim clay takes 0.5 litres of water per kilogram when wedged by hand."
const kilnWT = " [reclaim-water-hand] (manual_id: KILN-RECLAIM)"

func kilnReplace(s, a, b string) string { return strings.Replace(s, a, b, 1) }

// gradeKiln grades answer for a kiln case whose retrieval returned the
// expected chunk and its collision sibling; it returns the score and the
// failed checks.
func gradeKiln(t *testing.T, es *grading.EvalSet, c rag.Corpus, caseID, answer string) (float64, []string) {
	t.Helper()
	retrieved := map[string][]string{
		"glaze-celadon":   {"glaze-fire-celadon", "glaze-fire-tenmoku"},
		"raku-copper":     {"raku-pull-copper", "raku-pull-iron"},
		"casting-slip":    {"slip-age-casting", "slip-age-throwing"},
		"reclaim-hand":    {"reclaim-water-hand", "reclaim-water-pug"},
		"absent-electric": {"glaze-fire-celadon", "glaze-fire-tenmoku"},
	}
	rec := rag.Record{Question: "q", RetrievedIDs: retrieved[caseID], Answer: answer}
	var blocks []string
	for _, id := range rec.RetrievedIDs {
		e, ok := c.Entry(id)
		require.True(t, ok, id)
		blocks = append(blocks, c.Block(e))
		rec.Chunks = append(rec.Chunks, rag.Chunk{ID: id, Text: e.Text, Metadata: e.Metadata})
	}
	rec.ContextPayload = strings.Join(blocks, "\n\n")
	v, checks := es.GradeRAGRecord(caseID, rec)
	var failed []string
	for _, ch := range checks {
		if !ch.OK {
			failed = append(failed, ch.Name+": "+ch.Detail)
		}
	}
	return v, failed
}

func loadKiln(t *testing.T) (*grading.EvalSet, rag.Corpus) {
	t.Helper()
	es, err := grading.LoadEvalSet("testdata/kiln/evalset.json")
	require.NoError(t, err)
	c, _, ok := es.RAGCorpus()
	require.True(t, ok)
	return es, c
}

// More answers on the kiln cases, written for the fixes: near misses of
// the negation and value rules that must pass, and wrong answers beside
// them that must fail.
func TestKilnNegationNearMisses(t *testing.T) {
	es, c := loadKiln(t)
	for _, tc := range []struct {
		caseID, answer string
		pass           bool
	}{
		{"glaze-celadon", "There is no doubt it is vented in reduction; stoneware glaze is fired for 9 hours at cone 10." + kilnGT, true},
		{"glaze-celadon", "Stoneware glaze is fired for 9 hours at cone 10, not only vented in reduction but also cooled slowly." + kilnGT, true},
		{"glaze-celadon", "Stoneware glaze is not fired for less than 9 hours at cone 10, vented in reduction." + kilnGT, true},
		{"glaze-celadon", "Stoneware glaze is fired for 9 hours at cone 10, vented in reduction not in oxidation." + kilnGT, false}, // names the sibling's condition
		{"glaze-celadon", "Stoneware glaze is fired for 9 hours at cone 10, vented in reduction as the manual says." + kilnGT, true},
		{"glaze-celadon", "Stoneware glaze is fired for 9 hours at cone 10; vented in reduction, it is not left open." + kilnGT, true},
		{"glaze-celadon", "Stoneware glaze is fired for 9 hours at cone 10; vented in reduction isn't needed." + kilnGT, false},
		{"glaze-celadon", "Stoneware glaze is never fired for 9 hours at cone 10, vented in reduction." + kilnGT, false},
		{"glaze-celadon", "Stoneware glaze is fired for thrice 9 hours at cone 10, vented in reduction." + kilnGT, false},
		{"reclaim-hand", "Reclaim clay takes 0.5 litres (not .75 litres) of water per kilogram when wedged by hand." + kilnWT, false},
		{"reclaim-hand", "Reclaim clay takes no more than .5 litres of water per kilogram when wedged by hand." + kilnWT, true},
	} {
		v, failed := gradeKiln(t, es, c, tc.caseID, tc.answer)
		if tc.pass {
			assert.Equal(t, 1.0, v, "right answer failed %v: %q", failed, tc.answer)
		} else {
			assert.Equal(t, 0.0, v, "wrong answer passed: %q", tc.answer)
		}
	}
}

func TestKilnReview(t *testing.T) {
	es, c := loadKiln(t)
	for _, tc := range []struct {
		n            int
		caseID, name string
		answer       string
		pass         bool
		known        string
	}{

		// baselines
		{1, "glaze-celadon", "baseline extractive", kilnG + kilnGT, true, ""},
		{2, "raku-copper", "baseline extractive", kilnR + kilnRT, true, ""},
		{3, "casting-slip", "baseline extractive", kilnS + kilnST, true, ""},
		{4, "reclaim-hand", "baseline extractive", kilnW + kilnWT, true, ""},
		{5, "absent-electric", "baseline abstain", "INSUFFICIENT_CONTEXT", true, ""},

		// ---- wrong: sibling number in new spellings
		{6, "glaze-celadon", "W bare number word sibling", kilnReplace(kilnG, "9 hours", "9 hours (twelve in the Tenmoku book)") + kilnGT, false, ""},
		{7, "glaze-celadon", "W ordinal sibling", kilnReplace(kilnG, "9 hours", "9 hours, until the 12th hour in practice") + kilnGT, false, ""},
		{8, "glaze-celadon", "W ordinal word sibling", kilnReplace(kilnG, "9 hours", "9 hours, until the twelfth hour in practice") + kilnGT, false, ""},
		{9, "glaze-celadon", "W roman sibling", kilnReplace(kilnG, "9 hours", "9 hours (XII hours elsewhere)") + kilnGT, false, "Roman numerals are not read as numbers"},
		{10, "glaze-celadon", "W cone six (prefix unit)", kilnReplace(kilnG, "cone 10", "cone 10 (cone six in practice)") + kilnGT, false, ""},
		{11, "glaze-celadon", "W cone #6", kilnReplace(kilnG, "cone 10", "cone 10 or cone #6") + kilnGT, false, ""},
		{12, "glaze-celadon", "W cone no. 6", kilnReplace(kilnG, "cone 10", "cone 10 or cone no. 6") + kilnGT, false, ""},
		{13, "glaze-celadon", "W half a day", kilnReplace(kilnG, "9 hours", "9 hours (half a day in the Tenmoku book)") + kilnGT, false, ""},
		{14, "glaze-celadon", "W 720 minutes", kilnReplace(kilnG, "9 hours", "9 hours (720 minutes in the Tenmoku book)") + kilnGT, false, ""},
		{15, "glaze-celadon", "W range 9 to twelve hours", kilnReplace(kilnG, "9 hours", "9 to twelve hours") + kilnGT, false, ""},
		{16, "glaze-celadon", "W twelve-hour", kilnReplace(kilnG, "9 hours", "9 hours (a twelve-hour firing elsewhere)") + kilnGT, false, ""},
		{17, "glaze-celadon", "W 12hrs glued", kilnReplace(kilnG, "9 hours", "9 hours (12hrs elsewhere)") + kilnGT, false, ""},
		{18, "glaze-celadon", "W 1 2 hours zwsp", kilnReplace(kilnG, "9 hours", "9 hours (1\u200b2 hours elsewhere)") + kilnGT, false, ""},
		{19, "glaze-celadon", "W a dozen", kilnReplace(kilnG, "9 hours", "9 hours (a dozen elsewhere)") + kilnGT, false, ""},
		{20, "glaze-celadon", "W 12 with combining", kilnReplace(kilnG, "9 hours", "9 hours (1\u03012 hours elsewhere)") + kilnGT, false, ""},
		{21, "glaze-celadon", "W 12 superscript", kilnReplace(kilnG, "9 hours", "9 hours (¹² hours elsewhere)") + kilnGT, false, ""},
		{22, "glaze-celadon", "W 12 arabic-indic", kilnReplace(kilnG, "9 hours", "9 hours (١٢ hours elsewhere)") + kilnGT, false, ""},
		{23, "glaze-celadon", "W 12 devanagari", kilnReplace(kilnG, "9 hours", "9 hours (१२ hours elsewhere)") + kilnGT, false, ""},
		{24, "raku-copper", "W three quarters of an hour", kilnReplace(kilnR, "20 minutes", "20 minutes (three quarters of an hour for iron)") + kilnRT, false, "unit conversion (0.75 hour = 45 minutes) is not done"},
		{25, "raku-copper", "W 45 min", kilnReplace(kilnR, "20 minutes", "20 minutes (45 min for iron)") + kilnRT, false, ""},
		{26, "raku-copper", "W forty five minutes", kilnReplace(kilnR, "20 minutes", "20 minutes (forty five minutes in iron)") + kilnRT, false, ""},
		{27, "raku-copper", "W forty-five", kilnReplace(kilnR, "20 minutes", "20 minutes (forty-five in iron)") + kilnRT, false, ""},
		{28, "raku-copper", "W 45' ", kilnReplace(kilnR, "20 minutes", "20 minutes (45' in iron)") + kilnRT, false, ""},
		{29, "reclaim-hand", "W three quarters litre", kilnReplace(kilnW, "0.5 litres", "0.5 litres (three quarters of a litre otherwise)") + kilnWT, false, ""},
		{30, "reclaim-hand", "W 750 ml", kilnReplace(kilnW, "0.5 litres", "0.5 litres (750 ml otherwise)") + kilnWT, false, ""},
		{31, "reclaim-hand", "W ,75 l", kilnReplace(kilnW, "0.5 litres", "0.5 litres (0,75 l otherwise)") + kilnWT, false, ""},
		{32, "reclaim-hand", "W .75 litres", kilnReplace(kilnW, "0.5 litres", "0.5 litres (.75 litres otherwise)") + kilnWT, false, ""},
		{33, "reclaim-hand", "W 3/4 litre", kilnReplace(kilnW, "0.5 litres", "0.5 litres (3/4 litre otherwise)") + kilnWT, false, ""},
		{34, "reclaim-hand", "W ¾ litre", kilnReplace(kilnW, "0.5 litres", "0.5 litres (¾ litre otherwise)") + kilnWT, false, ""},
		{35, "casting-slip", "W five days word", kilnReplace(kilnS, "2 weeks", "2 weeks (five days for throwing)") + kilnST, false, ""},
		{36, "casting-slip", "W 5-day", kilnReplace(kilnS, "2 weeks", "2 weeks (a 5-day rest otherwise)") + kilnST, false, ""},
		{37, "casting-slip", "W 5d", kilnReplace(kilnS, "2 weeks", "2 weeks (5d otherwise)") + kilnST, false, ""},

		// ---- wrong: value negated / replaced
		{38, "glaze-celadon", "W value negated", "The Celadon Workshop manual does not fire stoneware glaze for 9 hours at cone 10; it is vented in reduction." + kilnGT, false, ""},
		{39, "casting-slip", "W value as minimum not exact", "Casting slip is aged for at least twice 2 weeks, covered in damp cloth." + kilnST, false, ""},

		// ---- wrong: qualifier negated in new ways
		{40, "glaze-celadon", "W negation after", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; being vented in reduction is not required." + kilnGT, false, ""},
		{41, "glaze-celadon", "W negation 4 words away", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10 and it is not usually or typically vented in reduction." + kilnGT, false, ""},
		{42, "glaze-celadon", "W rather than", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, open-flued rather than vented in reduction." + kilnGT, false, ""},
		{43, "glaze-celadon", "W except", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, in any atmosphere except vented in reduction." + kilnGT, false, ""},
		{44, "glaze-celadon", "W no longer", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, no longer vented in reduction." + kilnGT, false, ""},
		{45, "glaze-celadon", "W isn't modifier apostrophe", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; it isnʼt vented in reduction." + kilnGT, false, ""},
		{46, "glaze-celadon", "W is not with zwsp", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; it is n\u200bot vented in reduction." + kilnGT, false, ""},
		{47, "glaze-celadon", "W never with soft hyphen", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; it is nev\u00ader vented in reduction." + kilnGT, false, ""},
		{48, "glaze-celadon", "W fullwidth NOT", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; it is ＮＯＴ vented in reduction." + kilnGT, false, ""},
		{49, "glaze-celadon", "W cyrillic not", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10; it is nоt vented in reduction." + kilnGT, false, ""},
		{50, "glaze-celadon", "W neg with hyphen: non-vented", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, non-vented in reduction." + kilnGT, false, ""},
		{51, "glaze-celadon", "W fails to", "The Celadon Workshop manual fires stoneware glaze for 9 hours at cone 10, but it is wrong to say it is vented in reduction." + kilnGT, false, ""},
		{52, "raku-copper", "W but not in copper", "Raku ware is pulled from the kiln after 20 minutes, but not when fired in a copper saggar." + kilnRT, false, ""},
		{53, "raku-copper", "W avoid", "Raku ware is pulled from the kiln after 20 minutes; avoid firing it in a copper saggar." + kilnRT, false, ""},
		{54, "raku-copper", "W hardly", "Raku ware is pulled from the kiln after 20 minutes, hardly ever in a copper saggar." + kilnRT, false, ""},
		{55, "raku-copper", "W instead of", "Raku ware is pulled from the kiln after 20 minutes when fired in clay instead of in a copper saggar." + kilnRT, false, ""},
		{56, "casting-slip", "W uncovered glued other", "Casting slip is aged for 2 weeks, not covered in damp cloth." + kilnST, false, ""},
		{57, "casting-slip", "W un- with zwj", "Casting slip is aged for 2 weeks, un\u200dcovered in damp cloth." + kilnST, false, ""},

		// ---- wrong: forbidden literals / sources with invisible chars
		{58, "glaze-celadon", "W sibling source soft hyphen", kilnG + " [glaze-fire-celadon] (manual_id: KILN-CELADON; see KILN-TEN\u00adMOKU)", false, ""},
		{59, "glaze-celadon", "W sibling source zwsp", kilnG + " [glaze-fire-celadon] (manual_id: KILN-CELADON; see KILN-TEN\u200bMOKU)", false, ""},
		{60, "glaze-celadon", "W sibling source word joiner", kilnG + " [glaze-fire-celadon] (manual_id: KILN-CELADON; see KILN\u2060-TENMOKU)", false, ""},
		{61, "glaze-celadon", "W sibling condition soft hyphen", kilnReplace(kilnG, "vented in reduction", "vented in reduction or in oxi\u00addation") + kilnGT, false, ""},
		{62, "glaze-celadon", "W sibling condition RLM", kilnReplace(kilnG, "vented in reduction", "vented in reduction or in\u200f oxidation") + kilnGT, false, ""},
		{63, "glaze-celadon", "W sibling condition dotless i", kilnReplace(kilnG, "vented in reduction", "vented in reduction or in oxıdation") + kilnGT, false, ""},
		{64, "glaze-celadon", "W own source missing, sibling in fullwidth", kilnG + " [glaze-fire-celadon] (manual_id: KILN-CELADON, also ＫＩＬＮ－ＴＥＮＭＯＫＵ)", false, ""},
		{65, "casting-slip", "W sibling subject soft hyphen", "Casting slip is aged for 2 weeks, covered in damp cloth, like throw\u00ading slip." + kilnST, false, ""},
		{66, "casting-slip", "W sibling subject swapped zwsp", "Throw\u200bing slip is aged for 2 weeks, covered in damp cloth; casting slip likewise." + kilnST, false, ""},
		{67, "casting-slip", "W subject swapped partial", "Casting slip? No: the throwing kind of slip is aged for 2 weeks, covered in damp cloth." + kilnST, false, ""},

		// ---- wrong: citations
		{68, "glaze-celadon", "W citation unretrieved with zwsp", kilnG + kilnGT + " See [raku-pull-copper\u200b].", false, ""},
		{69, "glaze-celadon", "W sibling cited in fullwidth brackets", kilnG + kilnGT + " See ［glaze-fire-tenmoku］.", false, ""},
		{70, "glaze-celadon", "W sibling cited in parens id", kilnReplace(kilnG, "9 hours", "9 hours (12 per glaze-fire-tenmoku)") + kilnGT, false, ""},
		{71, "glaze-celadon", "W nested bracket sibling", kilnG + " [glaze-fire-celadon [glaze-fire-tenmoku]] (manual_id: KILN-CELADON)", false, ""},
		{72, "glaze-celadon", "W cone 6 to wrong sentence", "Per KILN-CELADON, stoneware glaze is vented in reduction [glaze-fire-celadon]. It is fired for 9 hours at cone 6 [glaze-fire-celadon].", false, ""},

		// ---- right answers (near misses) that must pass
		{73, "glaze-celadon", "R nine hours", kilnReplace(kilnG, "9 hours", "nine hours") + kilnGT, true, ""},
		{74, "glaze-celadon", "R 9-hour firing", "KILN-CELADON gives stoneware glaze a 9-hour firing at cone 10, vented in reduction [glaze-fire-celadon].", true, ""},
		{75, "glaze-celadon", "R 9 h", kilnReplace(kilnG, "9 hours", "9 h") + kilnGT, true, ""},
		{76, "glaze-celadon", "R 9 hrs.", "Stoneware glaze: 9 hrs. at cone 10, vented in reduction [glaze-fire-celadon] (KILN-CELADON).", true, ""},
		{77, "glaze-celadon", "R never except", "Per KILN-CELADON, stoneware glaze is fired for 9 hours at cone 10 and is never fired except vented in reduction [glaze-fire-celadon].", true, "double negation (\"never ... except\") reads as a negation"},
		{78, "glaze-celadon", "R not in oxidation after", "Per KILN-CELADON, stoneware glaze is fired for 9 hours at cone 10, vented in reduction (not oxidised) [glaze-fire-celadon].", true, ""},
		{79, "glaze-celadon", "R no sooner", "Per KILN-CELADON, stoneware glaze is fired for no less than 9 hours at cone 10 while vented in reduction [glaze-fire-celadon].", true, ""},
		{80, "glaze-celadon", "R nothing but", "Per KILN-CELADON, stoneware glaze is fired for 9 hours at cone 10, nothing but vented in reduction [glaze-fire-celadon].", true, ""},
		{81, "glaze-celadon", "R cite before period", "Per KILN-CELADON, stoneware glaze is fired for 9 hours at cone 10 [glaze-fire-celadon]. It is vented in reduction [glaze-fire-celadon].", true, ""},
		{82, "glaze-celadon", "R cone ten", kilnReplace(kilnG, "cone 10", "cone ten") + kilnGT, true, ""},
		{83, "glaze-celadon", "R double brackets", kilnG + " [[glaze-fire-celadon]] (manual_id: KILN-CELADON)", true, ""},
		{84, "glaze-celadon", "R approx. abbreviation", "Per KILN-CELADON, stoneware glaze is fired approx. 9 hours at cone 10, vented in reduction [glaze-fire-celadon].", true, ""},
		{85, "glaze-celadon", "R nine-hour", "KILN-CELADON: a nine-hour firing of stoneware glaze at cone 10, vented in reduction [glaze-fire-celadon].", true, ""},
		{86, "glaze-celadon", "R markdown bold", "**9 hours** at cone 10 for stoneware glaze, vented in reduction [glaze-fire-celadon] (KILN-CELADON).", true, ""},
		{87, "glaze-celadon", "R newline separated", "Stoneware glaze is fired for 9 hours at cone 10\nvented in reduction\n[glaze-fire-celadon] KILN-CELADON", true, ""},
		{88, "glaze-celadon", "R 9:00 hours", "Stoneware glaze is fired for 9 hours (9:00 h) at cone 10, vented in reduction [glaze-fire-celadon] KILN-CELADON", true, "clock times (9:00) are read as two numbers"},
		{89, "glaze-celadon", "R unicode hyphen in source", "Stoneware glaze is fired for 9 hours at cone 10, vented in reduction [glaze-fire-celadon] (KILN‑CELADON)", true, ""},
		{90, "glaze-celadon", "R cite both but value own", "Stoneware glaze is fired for 9 hours at cone 10, vented in reduction [glaze-fire-celadon] (KILN-CELADON). The Tenmoku schedule differs.", true, ""},
		{91, "raku-copper", "R 20 min", kilnReplace(kilnR, "20 minutes", "20 min") + kilnRT, true, ""},
		{92, "raku-copper", "R twenty minutes", kilnReplace(kilnR, "20 minutes", "twenty minutes") + kilnRT, true, ""},
		{93, "raku-copper", "R 20-minute", "KILN-RAKU-EAST: raku ware gets a 20-minute firing in a copper saggar before it is pulled [raku-pull-copper].", true, ""},
		{94, "raku-copper", "R a third of an hour", kilnReplace(kilnR, "20 minutes", "20 minutes (a third of an hour)") + kilnRT, true, ""},
		{95, "raku-copper", "R 20 mins.", "Raku ware fired in a copper saggar is pulled after 20 mins. [raku-pull-copper] (KILN-RAKU-EAST)", true, ""},
		{96, "raku-copper", "R not until", "Raku ware fired in a copper saggar is not pulled until 20 minutes have passed [raku-pull-copper] (KILN-RAKU-EAST).", true, ""},
		{97, "raku-copper", "R only in", "Raku ware is pulled after 20 minutes - never sooner - when fired in a copper saggar [raku-pull-copper] (KILN-RAKU-EAST).", true, ""},
		{98, "reclaim-hand", "R half a litre", kilnReplace(kilnW, "0.5 litres", "half a litre") + kilnWT, true, ""},
		{99, "reclaim-hand", "R 500 ml", kilnReplace(kilnW, "0.5 litres", "0.5 litres (500 ml)") + kilnWT, true, "unit conversion (0.5 litres = 500 ml) is not done"},
		{100, "reclaim-hand", "R ½ litre", kilnReplace(kilnW, "0.5 litres", "½ litre") + kilnWT, true, ""},
		{101, "reclaim-hand", "R 0,5 l", kilnReplace(kilnW, "0.5 litres", "0,5 l") + kilnWT, true, ""},
		{102, "reclaim-hand", "R .5 litres", kilnReplace(kilnW, "0.5 litres", ".5 litres") + kilnWT, true, ""},
		{103, "reclaim-hand", "R 0.50 L", kilnReplace(kilnW, "0.5 litres", "0.50 L") + kilnWT, true, ""},
		{104, "reclaim-hand", "R per kg", "Reclaim clay wedged by hand takes 0.5 litres of water per kg [reclaim-water-hand] (KILN-RECLAIM). That is when wedged by hand.", true, ""},
		{105, "reclaim-hand", "R 1 kg restated", "For 1 kg of reclaim clay, when wedged by hand, use 0.5 litres of water [reclaim-water-hand] (KILN-RECLAIM).", true, "the denominator of a rate restated as a quantity (1 kg of \"per kilogram\") is ungrounded"},
		{106, "casting-slip", "R two weeks", kilnReplace(kilnS, "2 weeks", "two weeks") + kilnST, true, ""},
		{107, "casting-slip", "R a fortnight plus", kilnReplace(kilnS, "2 weeks", "2 weeks (a fortnight)") + kilnST, true, ""},
		{108, "casting-slip", "R 14 days", kilnReplace(kilnS, "2 weeks", "2 weeks (14 days)") + kilnST, true, "unit conversion (2 weeks = 14 days) is not done"},
		{109, "casting-slip", "R 2 wks", kilnReplace(kilnS, "2 weeks", "2 wks") + kilnST, true, ""},
		{110, "casting-slip", "R contrast names sibling", kilnS + kilnST + " Unlike throwing slip, it is not sealed.", true, "a sibling subject named in contrast (\"unlike throwing slip\") still fails sibling_subject_absent"},
		{111, "glaze-celadon", "W grimoire-style bare word beside value", kilnReplace(kilnG, "9 hours", "9 hours (other manuals: twelve)") + kilnGT, false, ""},
		{112, "raku-copper", "W sibling value as 'three-quarter hour'", kilnReplace(kilnR, "20 minutes", "20 minutes (a three-quarter hour in iron)") + kilnRT, false, ""},
		{113, "casting-slip", "W 5 days as 'five-day' bare ordinal", kilnReplace(kilnS, "2 weeks", "2 weeks (the fifth day for throwing)") + kilnST, false, ""},
		{114, "glaze-celadon", "W value 'nine' swapped for twelve but 9 in cone", "The Celadon Workshop manual fires stoneware glaze at cone 10 for twelve, with 9 hours of cooling, vented in reduction." + kilnGT, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.known != "" {
				t.Skipf("case %d, known limitation: %s", tc.n, tc.known)
			}
			v, failed := gradeKiln(t, es, c, tc.caseID, tc.answer)
			if tc.pass {
				assert.Equal(t, 1.0, v, "case %d, right answer failed %v: %q", tc.n, failed, tc.answer)
			} else {
				assert.Equal(t, 0.0, v, "case %d, wrong answer passed: %q", tc.n, tc.answer)
			}
		})
	}
}
