package golden

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// ordinals maps English ordinal words to their values; built once, never
// mutated. "first" and "second" are left out: the one is below any value
// worth forbidding, the other is also a unit of time.
var ordinals = sync.OnceValue(func() map[string]float64 {
	return map[string]float64{
		"third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10,
		"eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14, "fifteenth": 15, "sixteenth": 16,
		"seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20, "thirtieth": 30, "fortieth": 40,
		"fiftieth": 50, "sixtieth": 60, "seventieth": 70, "eightieth": 80, "ninetieth": 90, "hundredth": 100,
		"thousandth": 1000,
	}
})

// compoundOrdinal is an ordinal word that may end a compound ordinal
// ("twenty-first"), where first and second are no longer ambiguous.
func compoundOrdinal(w string) (float64, bool) {
	switch w {
	case "first":
		return 1, true
	case "second":
		return 2, true
	}
	o, ok := ordinals()[w]
	return o, ok
}

// fractionWord returns the denominator a fraction word names ("half" 2,
// "thirds" 3, "quarter" 4).
func fractionWord(w string) (float64, bool) {
	switch w {
	case "half", "halves":
		return 2, true
	case "third", "thirds":
		return 3, true
	case "quarter", "quarters", "fourths":
		return 4, true
	}
	return 0, false
}

// parseValues is parse plus the numbers a wrong answer may state without a
// unit word: bare cardinal words of two or more ("twelve", "forty-five",
// "a dozen"), ordinals ("12th", "twelfth", "forty-fifth") and fractions in
// words ("three quarters of a litre", "a third", "half"). Such a number
// takes the declared unit after it, when there is one, else none. It serves
// the forbidden-value check only: in numeric grounding a bare word ("two
// sources") is no claim of a value.
func (u *units) parseValues(s string) []Quantity {
	out := u.parse(s)
	covered := func(i int) bool {
		for _, q := range out {
			if i >= q.Start && i < q.End {
				return true
			}
		}
		return false
	}
	var extra []Quantity
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		prev, _ := utf8.DecodeLastRuneInString(s[:i])
		atWord := i == 0 || !(unicode.IsLetter(prev) || unicode.IsDigit(prev))
		switch {
		case isDigit(s[i]) && atWord && !covered(i):
			if q, ok := u.ordinalDigits(s, i); ok {
				extra = append(extra, q)
				i = q.End
				continue
			}
			i = skipAlnum(s, i)
		case unicode.IsLetter(r) && atWord && !covered(i):
			if q, ok := u.looseWords(s, i); ok {
				extra = append(extra, q)
				i = q.End
				continue
			}
			for i < len(s) {
				q, qs := utf8.DecodeRuneInString(s[i:])
				if !unicode.IsLetter(q) {
					break
				}
				i += qs
			}
		default:
			i += sz
		}
	}
	return append(out, extra...)
}

// ordinalDigits reads "12th", "3rd", "21st" at i.
func (u *units) ordinalDigits(s string, i int) (Quantity, bool) {
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	ws := wordsFrom(s, j, 1)
	if len(ws) == 0 || ws[0].start != j {
		return Quantity{}, false
	}
	switch ws[0].text {
	case "st", "nd", "rd", "th":
	default:
		return Quantity{}, false
	}
	v, err := strconv.ParseFloat(s[i:j], 64)
	if err != nil || v < 2 {
		return Quantity{}, false
	}
	return u.withUnit(s, i, ws[0].end, v), true
}

// looseWords reads a number in words at i that needs no unit after it.
func (u *units) looseWords(s string, i int) (Quantity, bool) {
	ws := wordsFrom(s, i, 14)
	if len(ws) == 0 {
		return Quantity{}, false
	}
	article := ws[0].text == "a" || ws[0].text == "an"
	// "a third", "a quarter", "a half": one part.
	if article && len(ws) > 1 {
		if d, ok := fractionWord(ws[1].text); ok {
			return u.fraction(s, i, ws[2:], ws[1].end, 1/d), true
		}
	}
	v, n, seen := wordValue(ws)
	if !seen {
		if o, ok := ordinals()[ws[0].text]; ok {
			return u.withUnit(s, i, ws[0].end, o), true
		}
		if ws[0].text == "second" && prevWord(s, i) == "the" {
			return u.withUnit(s, i, ws[0].end, 2), true
		}
		return Quantity{}, false
	}
	end := ws[n-1].end
	if n < len(ws) {
		// "three quarters", "two thirds" of something.
		if d, ok := fractionWord(ws[n].text); ok && v >= 1 && v == math.Trunc(v) {
			return u.fraction(s, i, ws[n+1:], ws[n].end, v/d), true
		}
		// "four hundredth", "two thousandth".
		switch ws[n].text {
		case "hundredth":
			return u.withUnit(s, i, ws[n].end, v*100), true
		case "thousandth":
			return u.withUnit(s, i, ws[n].end, v*1000), true
		}
		// "forty-fifth", "four hundred and twelfth", "twenty-first".
		m := n
		if ws[m].text == "and" && m+1 < len(ws) {
			m++
		}
		if o, ok := compoundOrdinal(ws[m].text); ok && v >= 20 {
			if step := math.Pow(10, math.Floor(math.Log10(v))); o < step && math.Mod(v, step) == 0 || o < 100 && math.Mod(v, 100) == 0 {
				return u.withUnit(s, i, ws[m].end, v+o), true
			}
		}
	}
	if v < 2 && !(ws[0].text == "half" && v == 0.5) {
		return Quantity{}, false
	}
	return u.withUnit(s, i, end, v), true
}

// fraction is a fraction in words ending at end, with "of a/an/the" and a
// declared unit after it taken when present.
func (u *units) fraction(s string, i int, rest []word, end int, v float64) Quantity {
	if len(rest) > 1 && rest[0].text == "of" {
		k := 1
		if rest[1].text == "a" || rest[1].text == "an" || rest[1].text == "the" {
			k = 2
		}
		if c, n := u.unitAt(rest[k:]); n > 0 && u.words[c] {
			e := rest[k+n-1].end
			return Quantity{Value: v, Unit: c, Text: s[i:e], Start: i, End: e}
		}
	}
	return u.withUnit(s, i, end, v)
}

// withUnit is the number v written at s[i:end], with the declared unit
// right after it when there is one, else bare.
func (u *units) withUnit(s string, i, end int, v float64) Quantity {
	q := Quantity{Value: v, Text: s[i:end], Start: i, End: end}
	if ws := wordsFrom(s, end, u.maxWords+1); len(ws) > 0 {
		if c, n := u.unitAt(ws); n > 0 && u.words[c] {
			q.Unit, q.End = c, ws[n-1].end
			q.Text = s[i:q.End]
		}
	}
	return q
}

// digitizeWords returns folded text s with every cardinal number written in
// words replaced by its digits ("cone six" -> "cone 6"), on word
// boundaries, so a forbidden literal of the form unit-then-number matches
// its spelling in words.
func digitizeWords(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) {
			sb.WriteString(s[i : i+sz])
			i += sz
			continue
		}
		ws := wordsFrom(s, i, 12)
		if v, n, seen := wordValue(ws); seen && n > 0 && v == math.Trunc(v) {
			if _, card := cardinals()[ws[0].text]; card {
				sb.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
				i = ws[n-1].end
				continue
			}
		}
		j := i
		for j < len(s) {
			q, qs := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsLetter(q) {
				break
			}
			j += qs
		}
		sb.WriteString(s[i:j])
		i = j
	}
	return sb.String()
}
