// Package window parses the windows of calls that commands and the
// report take (--from, --to, --last; from, to, last).
package window

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/verdryx/verdryx/outcome"
)

// Parse parses a window of the calls as the --from, --to and --last
// flags and the report's from, to and last query parameters take them:
// from and to RFC 3339 or a date (to a date means the end of that day
// UTC), last a positive duration (90m, 24h, 7d, 2w) alone, starting on
// the hour before now minus it. prefix names the inputs in errors ("--"
// for flags, "" for query parameters). Empty inputs leave the window open.
func Parse(prefix, from, to, last string, now time.Time) (outcome.Options, error) {
	f, err := When(prefix+"from", from, false)
	if err != nil {
		return outcome.Options{}, err
	}
	if last != "" {
		if from != "" || to != "" {
			return outcome.Options{}, fmt.Errorf("%slast: give it alone, not with %sfrom or %sto", prefix, prefix, prefix)
		}
		d, err := Last(prefix+"last", last)
		if err != nil {
			return outcome.Options{}, err
		}
		f = now.UTC().Add(-d).Truncate(time.Hour)
	}
	t, err := When(prefix+"to", to, true)
	if err != nil {
		return outcome.Options{}, err
	}
	return outcome.Options{From: f, To: t}, nil
}

// When parses a time: RFC 3339, or a date (2026-11-30) meaning its
// start, or with endOfDay the start of the next day (UTC). "" is the zero
// time. name names the input in errors.
func When(name, v string, endOfDay bool) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
		return t, nil
	}
	d, err := time.Parse(time.DateOnly, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("%s %q: want RFC 3339 (2026-11-30T12:00:00Z) or a date (2026-11-30)", name, v)
	}
	if endOfDay {
		d = d.AddDate(0, 0, 1)
	}
	return d, nil
}

// Last parses a positive duration as time.ParseDuration does, plus
// days (7d) and weeks (2w); one past the int64 range is clamped to it
// (about 292 years). name names the input in errors.
func Last(name, v string) (time.Duration, error) {
	if v == "" {
		return 0, fmt.Errorf("%s is empty: want a positive duration (90m, 24h, 7d, 2w)", name)
	}
	unit := map[byte]time.Duration{'d': 24 * time.Hour, 'w': 7 * 24 * time.Hour}
	if u, ok := unit[v[len(v)-1]]; ok {
		n, err := strconv.Atoi(v[:len(v)-1])
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%s %q: want a positive duration (90m, 24h, 7d, 2w)", name, v)
		}
		if n > int(math.MaxInt64/u) {
			return math.MaxInt64, nil
		}
		return time.Duration(n) * u, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s %q: want a positive duration (90m, 24h, 7d, 2w)", name, v)
	}
	return d, nil
}
