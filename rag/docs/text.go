package docs

import "bytes"

// parseText splits plain text into paragraphs: runs of lines separated
// by blank (whitespace-only) lines. A unit's span is its first line's
// start to its last line's end, without the line break; its text is
// exactly those bytes.
func parseText(src []byte) []unit {
	var units []unit
	start := -1
	end := 0
	for i := 0; i < len(src); {
		j := bytes.IndexByte(src[i:], '\n')
		next := len(src)
		if j >= 0 {
			next = i + j + 1
		}
		line := bytes.TrimRight(src[i:next], " \t\r\n\f\v")
		if len(bytes.TrimSpace(line)) == 0 {
			if start >= 0 {
				units = append(units, unit{text: string(src[start:end]), start: start, end: end})
				start = -1
			}
		} else {
			if start < 0 {
				start = i
			}
			end = i + len(line)
		}
		i = next
	}
	if start >= 0 {
		units = append(units, unit{text: string(src[start:end]), start: start, end: end})
	}
	return units
}
