package golden

import (
	"math"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/verdryx/verdryx/rag"
)

// Quantity is a number read from text as a value, with its unit.
type Quantity struct {
	// Value is the parsed number ("four", "4", "４" and "1,000" are values).
	Value float64
	// Unit is the canonical unit that follows the number ("hour" for "3h",
	// "3-hour" and "three hours"), the stem of the word that follows when it
	// is no declared unit, or "" for a bare number.
	Unit string
	// Prev is the stem of the word right before the number ("hardness 8").
	Prev string
	// Text is the quantity as written (in folded form).
	Text string
	// Start and End are the byte span of Text in the folded text.
	Start, End int
}

// Same reports whether q and o state one value: equal numbers and the same
// unit, or no unit on one side.
func (q Quantity) Same(o Quantity) bool {
	if math.Abs(q.Value-o.Value) > 1e-9*math.Max(1, math.Abs(q.Value)) {
		return false
	}
	return q.Unit == "" || o.Unit == "" || q.Unit == o.Unit || unitPrefix(q.Unit, o.Unit) || unitPrefix(o.Unit, q.Unit)
}

// unitPrefix lets an undeclared unit written in part ("7 moon phases" reads
// the unit "moon") agree with its compound ("moonphase").
func unitPrefix(short, long string) bool {
	return len([]rune(short)) >= 4 && strings.HasPrefix(long, short)
}

// String is the quantity in canonical form ("4 pint").
func (q Quantity) String() string {
	v := strconv.FormatFloat(q.Value, 'f', -1, 64)
	if q.Unit == "" {
		return v
	}
	return v + " " + q.Unit
}

// DefaultUnits is the unit table every corpus starts from: canonical unit
// -> the spellings that name it (singular, plural, abbreviations). A
// corpus's "units" member adds to it and overrides an alias.
func DefaultUnits() map[string][]string {
	return map[string][]string{
		"second":       {"s", "sec", "secs", "second", "seconds"},
		"minute":       {"min", "mins", "minute", "minutes"},
		"hour":         {"h", "hr", "hrs", "hour", "hours"},
		"day":          {"d", "day", "days"},
		"week":         {"wk", "wks", "week", "weeks"},
		"month":        {"mo", "mos", "month", "months"},
		"year":         {"y", "yr", "yrs", "year", "years"},
		"gram":         {"g", "gram", "grams", "gramme", "grammes"},
		"kilogram":     {"kg", "kilogram", "kilograms", "kilo", "kilos"},
		"milligram":    {"mg", "milligram", "milligrams"},
		"litre":        {"l", "litre", "litres", "liter", "liters"},
		"millilitre":   {"ml", "millilitre", "millilitres", "milliliter", "milliliters"},
		"pint":         {"pt", "pts", "pint", "pints"},
		"ounce":        {"oz", "ounce", "ounces"},
		"pound":        {"lb", "lbs", "pound", "pounds"},
		"dram":         {"dr", "drs", "dram", "drams", "drachm", "drachms"},
		"grain":        {"gr", "grs", "grain", "grains"},
		"metre":        {"m", "metre", "metres", "meter", "meters"},
		"centimetre":   {"cm", "centimetre", "centimetres", "centimeter", "centimeters"},
		"millimetre":   {"mm", "millimetre", "millimetres", "millimeter", "millimeters"},
		"kilometre":    {"km", "kilometre", "kilometres", "kilometer", "kilometers"},
		"inch":         {"inch", "inches"},
		"foot":         {"ft", "foot", "feet"},
		"newton-metre": {"nm", "n m", "n-m", "newton-metre", "newton-metres", "newton-meter", "newton-meters", "newton metre", "newton metres"},
		"bar":          {"bar", "bars"},
		"percent":      {"%", "percent", "per cent", "pct"},
		"degree":       {"°", "deg", "degree", "degrees"},
	}
}

// units is a resolved unit table.
type units struct {
	alias map[string]string // squashed alias -> canonical
	// words are unit words after which a number word ("four") is read as a
	// quantity: every alias and canonical name plus the units the corpus
	// writes after digits.
	words    map[string]bool
	maxWords int
}

// squash joins the words of a unit spelling: "Newton-Metres" -> "newtonmetres".
func squash(s string) string {
	var sb strings.Builder
	for _, r := range foldText(s).s {
		if !isSeparator(r) {
			sb.WriteRune(r)
		}
	}
	return sb.String()
}

func newUnits(declared map[string][]string) *units {
	u := &units{alias: map[string]string{}, words: map[string]bool{}, maxWords: 1}
	add := func(table map[string][]string) {
		for canon, aliases := range table {
			for _, a := range append([]string{canon}, aliases...) {
				u.alias[squash(a)] = squash(canon)
				u.maxWords = max(u.maxWords, len(strings.FieldsFunc(a, isSeparator)))
			}
		}
	}
	add(DefaultUnits())
	add(declared)
	for a, c := range u.alias {
		if len([]rune(a)) > 1 { // one-letter abbreviations only count after digits
			u.words[a] = true
		}
		u.words[c] = true
	}
	return u
}

// observe adds the unit words the corpus's texts write after digits, so
// "seven moon-phases" reads as a quantity in a corpus that writes "7
// moon-phases".
func (u *units) observe(c rag.Corpus) {
	for _, e := range c.Entries {
		for _, q := range u.parse(foldText(e.Text).s) {
			if q.Unit != "" {
				u.words[q.Unit] = true
			}
		}
	}
}

// cardinals maps English cardinal words to their values; built once,
// never mutated.
var cardinals = sync.OnceValue(func() map[string]float64 {
	return map[string]float64{
		"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
		"ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15, "sixteen": 16,
		"seventeen": 17, "eighteen": 18, "nineteen": 19, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
		"sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
	}
})

// isStopWord reports a word that never serves as a unit.
func isStopWord(w string) bool {
	switch w {
	case "a", "an", "the", "of", "and", "or", "to", "in", "on", "at", "for", "is", "are", "was", "be", "by", "with", "it",
		"as", "per", "each", "than", "from", "that", "this", "when", "while", "after", "before", "during", "not", "no":
		return true
	}
	return false
}

// word is a run of letters in folded text.
type word struct {
	text       string
	start, end int
	// hyphen is true when the word was joined to the previous token by a
	// hyphen or dash with no space.
	hyphen bool
}

// wordsFrom returns up to n words starting at i, stopping at punctuation
// other than hyphens, at a digit, or at a citation bracket.
func wordsFrom(s string, i, n int) []word {
	var out []word
	hyphen := false
	for i < len(s) && len(out) < n {
		r, sz := utf8.DecodeRuneInString(s[i:])
		switch {
		case unicode.IsLetter(r) || r == '%' || r == '°':
			j := i
			if r == '%' || r == '°' {
				j += sz
			} else {
				for j < len(s) {
					q, qs := utf8.DecodeRuneInString(s[j:])
					if !unicode.IsLetter(q) && q != '\'' {
						break
					}
					j += qs
				}
			}
			out = append(out, word{text: strings.TrimSuffix(s[i:j], "'"), start: i, end: j, hyphen: hyphen})
			hyphen = false
			i = j
		case unicode.Is(unicode.Pd, r) || r == '\u2212' || r == '_':
			hyphen = true
			i += sz
		case r == ' ' || r == '\t' || r == '\n' || r == '\r':
			hyphen = false
			i += sz
		default:
			return out
		}
	}
	return out
}

// unitStem lightly de-pluralises a folded word.
func unitStem(w string) string {
	w = strings.TrimSuffix(w, "'s")
	switch {
	case len(w) > 4 && strings.HasSuffix(w, "ies"):
		return w[:len(w)-3] + "y"
	case len(w) > 4 && (strings.HasSuffix(w, "ches") || strings.HasSuffix(w, "shes") || strings.HasSuffix(w, "sses") || strings.HasSuffix(w, "xes")):
		return w[:len(w)-2]
	case len(w) > 3 && strings.HasSuffix(w, "s") && !strings.HasSuffix(w, "ss"):
		return w[:len(w)-1]
	}
	return w
}

// unitAt reads the unit from words ws: the longest run of leading words
// that is a declared unit, else the first declared unit among the next
// words, else the stem of the first word unless it is a stop word. It
// returns the unit and the number of words consumed.
func (u *units) unitAt(ws []word) (string, int) {
	for k := min(len(ws), u.maxWords); k >= 1; k-- {
		var sb strings.Builder
		for _, w := range ws[:k] {
			sb.WriteString(w.text)
		}
		if c, ok := u.alias[sb.String()]; ok {
			return c, k
		}
	}
	if len(ws) == 0 || isStopWord(ws[0].text) {
		return "", 0
	}
	for i, w := range ws {
		if i > 0 && isStopWord(w.text) {
			break
		}
		if c, ok := u.alias[w.text]; ok && len(w.text) > 1 {
			return c, i + 1
		}
	}
	// An undeclared unit: the first word with the words hyphenated to it
	// ("moon-phases" -> "moonphase").
	comp, n := ws[0].text, 1
	for n < len(ws) && ws[n].hyphen {
		comp += ws[n].text
		n++
	}
	return unitStem(comp), n
}

// prevWord returns the stem of the word right before byte i (spaces and a
// colon may stand between).
func prevWord(s string, i int) string {
	j := i
	for j > 0 {
		r, sz := utf8.DecodeLastRuneInString(s[:j])
		if r != ' ' && r != ':' {
			break
		}
		j -= sz
	}
	k := j
	for k > 0 {
		r, sz := utf8.DecodeLastRuneInString(s[:k])
		if !unicode.IsLetter(r) {
			break
		}
		k -= sz
	}
	return unitStem(s[k:j])
}

// identChar reports a rune that makes digits next to it part of an
// identifier (M2, A-7, v2).
func identChar(r rune) bool { return unicode.IsLetter(r) || r == '_' }

// parse reads every quantity of folded text s: digits with thousands
// separators or a decimal point or comma (".5" is 0.5), simple fractions (1/2), English
// number words up to the thousands ("twenty-one", "two hundred and five"),
// "a dozen", "half", each with the unit after it ("4 pints", "4-pint",
// "4pt", "four pints"). Digits inside identifiers (M2, A-7, 3rd, 2-b) are
// not quantities. Number words count only before a unit word.
func (u *units) parse(s string) []Quantity {
	var out []Quantity
	for i := 0; i < len(s); {
		r, sz := utf8.DecodeRuneInString(s[i:])
		switch {
		case r >= '0' && r <= '9' || leadingDot(s, i):
			q, end, ok := u.digits(s, i)
			if ok {
				out = append(out, q)
			}
			i = max(end, i+sz)
		case unicode.IsLetter(r):
			j := i
			for j < len(s) {
				q, qs := utf8.DecodeRuneInString(s[j:])
				if !unicode.IsLetter(q) {
					break
				}
				j += qs
			}
			if q, end, ok := u.numberWords(s, i); ok {
				out = append(out, q)
				i = end
				continue
			}
			i = j
		default:
			i += sz
		}
	}
	return out
}

// digits parses a digit number starting at i.
func (u *units) digits(s string, i int) (Quantity, int, bool) {
	// Identifier context before: a letter or _, or a hyphen after a letter.
	if b, _ := utf8.DecodeLastRuneInString(s[:i]); identChar(b) {
		return Quantity{}, skipAlnum(s, i), false
	} else if b == '-' || unicode.Is(unicode.Pd, b) {
		bb, _ := utf8.DecodeLastRuneInString(s[:i-utf8.RuneLen(b)])
		if identChar(bb) {
			return Quantity{}, skipAlnum(s, i), false
		}
	}
	j := i
	for j < len(s) && isDigit(s[j]) {
		j++
	}
	intPart := strings.Builder{}
	intPart.WriteString(s[i:j])
	frac := ""
	// Thousands groups ("1,000", "12,500") and one decimal separator.
	for j+1 < len(s) && (s[j] == ',' || s[j] == '.') && isDigit(s[j+1]) {
		k := j + 1
		for k < len(s) && isDigit(s[k]) {
			k++
		}
		if s[j] == ',' && k-(j+1) == 3 && frac == "" {
			intPart.WriteString(s[j+1 : k])
			j = k
			continue
		}
		if frac != "" {
			break
		}
		frac = s[j+1 : k]
		j = k
	}
	num := intPart.String()
	if frac != "" {
		num += "." + frac
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return Quantity{}, j, false
	}
	// A fraction: 1/2, 3⁄4.
	if j < len(s) {
		if r, sz := utf8.DecodeRuneInString(s[j:]); (r == '/' || r == '⁄') && j+sz < len(s) && isDigit(s[j+sz]) {
			k := j + sz
			for k < len(s) && isDigit(s[k]) {
				k++
			}
			d, _ := strconv.ParseFloat(s[j+sz:k], 64)
			if d != 0 {
				v /= d
			}
			j = k
		}
	}
	q := Quantity{Value: v, Prev: prevWord(s, i), Start: i}
	// Letters glued to the digits: a unit abbreviation (3h, 4pt) or an
	// identifier (3rd, 2b).
	if j < len(s) {
		if r, _ := utf8.DecodeRuneInString(s[j:]); unicode.IsLetter(r) {
			ws := wordsFrom(s, j, 1)
			if c, ok := u.alias[ws[0].text]; ok {
				q.Unit, q.End = c, ws[0].end
				q.Text = s[i:q.End]
				return q, q.End, true
			}
			return Quantity{}, skipAlnum(s, i), false
		}
	}
	end := j
	ws := wordsFrom(s, j, 1+u.maxWords+2)
	if len(ws) > 0 && ws[0].hyphen {
		// "3-hour", "7-moon-phases"; "2-b" is an identifier.
		if _, known := u.alias[ws[0].text]; !known && len([]rune(ws[0].text)) < 3 {
			return Quantity{}, skipAlnum(s, ws[0].end), false
		}
	}
	// Multipliers: "3 dozen", "2 thousand".
	if len(ws) > 0 {
		if m, ok := multiplier(ws[0].text); ok {
			v *= m
			end = ws[0].end
			ws = ws[1:]
		}
	}
	q.Value = v
	if c, n := u.unitAt(ws); n > 0 {
		q.Unit, end = c, ws[n-1].end
	}
	q.End = end
	q.Text = s[i:end]
	return q, end, true
}

func multiplier(w string) (float64, bool) {
	switch w {
	case "dozen":
		return 12, true
	case "hundred":
		return 100, true
	case "thousand":
		return 1000, true
	case "million":
		return 1e6, true
	}
	return 0, false
}

// numberWords parses a number written in words starting at i; it is a quantity
// only when a unit word follows.
func (u *units) numberWords(s string, i int) (Quantity, int, bool) {
	ws := wordsFrom(s, i, 12)
	v, n, seen := wordValue(ws)
	if !seen {
		return Quantity{}, 0, false
	}
	rest := ws[n:]
	if len(rest) > 0 {
		if _, ord := ordinals()[rest[0].text]; ord {
			return Quantity{}, 0, false // "forty-fifth": an ordinal, read by parseValues
		}
	}
	c, k := u.unitAt(rest)
	if k == 0 || !u.words[c] {
		return Quantity{}, 0, false
	}
	end := rest[k-1].end
	return Quantity{Value: v, Unit: c, Prev: prevWord(s, i), Text: s[i:end], Start: i, End: end}, end, true
}

// wordValue reads a number written in words at the start of ws ("twenty-one",
// "two hundred and five", "a dozen", "half a", "one and a half"): its value,
// the number of words it takes and whether there is one.
func wordValue(ws []word) (float64, int, bool) {
	total, cur := 0.0, 0.0
	n := 0
	seen := false
	for n < len(ws) {
		w := ws[n].text
		if v, ok := cardinals()[w]; ok {
			cur += v
			seen = true
			n++
			continue
		}
		if m, ok := multiplier(w); ok && (seen || (n > 0 && (ws[n-1].text == "a" || ws[n-1].text == "an"))) {
			if cur == 0 {
				cur = 1
			}
			if m >= 1000 {
				total += cur * m
				cur = 0
			} else {
				cur *= m
			}
			seen = true
			n++
			continue
		}
		if (w == "a" || w == "an") && !seen && n+1 < len(ws) {
			if _, ok := multiplier(ws[n+1].text); ok {
				n++
				continue
			}
		}
		if w == "and" && seen && n+1 < len(ws) {
			if _, ok := cardinals()[ws[n+1].text]; ok {
				n++
				continue
			}
			if n+2 < len(ws) && ws[n+1].text == "a" && ws[n+2].text == "half" {
				cur += 0.5
				n += 3
				continue
			}
		}
		if w == "half" && !seen {
			cur, seen = 0.5, true
			n++
			if n < len(ws) && (ws[n].text == "a" || ws[n].text == "an") {
				n++
			}
			continue
		}
		break
	}
	return total + cur, n, seen
}

// leadingDot reports a decimal written without its zero (".5 litres"): a
// point before a digit, not after a letter, digit or point.
func leadingDot(s string, i int) bool {
	if s[i] != '.' || i+1 >= len(s) || !isDigit(s[i+1]) {
		return false
	}
	b, _ := utf8.DecodeLastRuneInString(s[:i])
	return i == 0 || !(unicode.IsLetter(b) || unicode.IsDigit(b) || b == '.' || b == '_')
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// skipAlnum returns the end of the run of letters, digits, hyphens and
// underscores at i.
func skipAlnum(s string, i int) int {
	for i < len(s) {
		r, sz := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '-' && r != '_' && !unicode.Is(unicode.Pd, r) {
			break
		}
		i += sz
	}
	return i
}
