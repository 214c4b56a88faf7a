package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/verdryx/verdryx/index/cache"
	"github.com/verdryx/verdryx/ragask"
)

// numRange is the values a numeric flag accepts: ok says whether a value
// is one of them, want says which in an error ("1 to 5").
type numRange struct {
	ok   func(float64) bool
	want string
}

func between(lo, hi float64) numRange {
	return numRange{func(x float64) bool { return x >= lo && x <= hi }, fmt.Sprintf("%g to %g", lo, hi)}
}

func atLeast(lo float64) numRange {
	return numRange{func(x float64) bool { return x >= lo }, fmt.Sprintf("at least %g", lo)}
}

// positive is for a duration or an amount where 0 means nothing useful.
func positive() numRange {
	return numRange{func(x float64) bool { return x > 0 }, "greater than 0"}
}

// posDur is a duration greater than 0.
func posDur() numRange {
	return numRange{func(x float64) bool { return x > 0 }, "a duration greater than 0"}
}

// finite is any number but NaN and the infinities (refused for every
// flag).
func finite() numRange {
	return numRange{func(float64) bool { return true }, "a finite number"}
}

// openUnit is (0, 1): a probability or a significance level.
func openUnit() numRange {
	return numRange{func(x float64) bool { return x > 0 && x < 1 }, "between 0 and 1, exclusive"}
}

// or adds one value with its own meaning (0: off, -1: no limit) to r.
func (r numRange) or(v float64, meaning string) numRange {
	return numRange{func(x float64) bool { return x == v || r.ok(x) }, fmt.Sprintf("%g (%s) or %s", v, meaning, r.want)}
}

// maxReplicas is the most replicas JetStream gives a stream or a bucket.
const maxReplicas = 5

// flagRanges holds the range of every numeric flag: by "command --flag"
// (the command path after "verdryx ") where a flag means different things
// in different commands, else by "--flag". TestEveryNumericFlagHasARange
// walks the command tree, so a new numeric flag without a range fails it.
func flagRanges() map[string]numRange {
	return map[string]numRange{
		// Shared by several commands, with one meaning.
		"--partitions":    atLeast(1),
		"--replicas":      between(1, maxReplicas),
		"--timeout":       posDur(),
		"--typed-timeout": posDur(),
		"--settle":        posDur(),
		"--dims":          atLeast(0).or(0, "the default"),
		"--alpha":         openUnit(),
		"--window":        atLeast(1),
		"--rounds":        atLeast(1),
		"--records":       atLeast(1),
		"--rows":          atLeast(1),
		"--seed":          atLeast(0),

		"ask --top-k": between(1, ragask.MaxTopK),

		"bench chain --time":          posDur(),
		"bench chaos --cluster":       atLeast(3).or(0, "the embedded server"),
		"bench chaos --drain-timeout": posDur().or(0, "the default"),
		"bench chaos --evals":         atLeast(0),
		"bench chaos --kills":         atLeast(0),
		"bench cluster --workers":     atLeast(1),
		"bench index --batch":         atLeast(1),
		"bench index --dim":           atLeast(1),
		"bench index --reps":          atLeast(1),
		"bench ingest --procs":        atLeast(1),
		"bench ingest-docs --asks":    atLeast(0),
		"bench ingest-docs --file-kb": atLeast(1),
		"bench ingest-docs --procs":   atLeast(1),
		"bench ingest-docs --sizes":   atLeast(1),
		"bench soak --calls-per-day":  atLeast(1000),
		"bench soak --day-seconds":    positive(),
		"bench soak --days":           atLeast(1),
		"bench soak --retention":      atLeast(1),
		"bench traces --in-flight":    atLeast(1).or(0, "every run"),
		"bench traces --procs":        atLeast(1),
		"bench traces --row-group":    atLeast(1),
		"compare --concurrency":       atLeast(1),
		"compare --cost-limit-usd":    atLeast(0),
		"compare --min-pairs":         atLeast(2),
		"cost-per-correct --procs":    atLeast(1).or(0, "GOMAXPROCS"),
		"slo --procs":                 atLeast(1).or(0, "GOMAXPROCS"),
		"drift --threshold":           between(0, 1),
		"eval --concurrency":          atLeast(1),
		"eval --cost-limit-usd":       atLeast(0),
		"eval --fail-under":           finite(), // above 1 refused by eval, off when negative
		"eval --semantic-threshold":   numRange{func(x float64) bool { return x > 0 && x <= 1 }, "greater than 0 and at most 1"},
		"index build --chunk-overlap": atLeast(0),
		"index build --chunk-tokens":  atLeast(1),
		"index build --embed-batch":   between(1, cache.MaxInputs),
		"index gc --keep":             atLeast(0),
		"report --drift-checks":       atLeast(1),
		"report --grid-runs":          atLeast(1),
		"serve --catch-up-wait":       posDur().or(0, "no wait"),
		"serve --duplicate-window":    posDur(),
		"serve --files-max-bytes":     atLeast(1),
		"serve --files-timeout":       posDur(),
		"serve --fold-after":          posDur(),
		"serve --max-cost-usd":        atLeast(0),
		"serve --max-record-bytes":    atLeast(1).or(-1, "no limit"),
		"serve --pinned-ttl":          posDur(),
		"serve --retention":           posDur(),
		"serve --retention-bytes":     atLeast(0),
		"serve --slo-every":           posDur().or(0, "off"),
		"serve --slo-window":          posDur(),
		"serve --snapshot-every":      posDur(),
		"serve --start-timeout":       posDur(),
		"serve --publish-retry-for":   posDur(),
		"serve --quality-retention":   posDur().or(0, "keep every record"),
		"slo --confidence":            openUnit(),
		"slo --cost-multiple":         positive(),
		"slo --min-events":            atLeast(1),
		"slo --target":                openUnit(),
		"tail --commit-every":         atLeast(1),
		"tail --max-line":             atLeast(1),
		"tail --poll":                 posDur(),
	}
}

// rangeOf returns the range of flag f of command cmd; ok is false when f
// is not numeric or has no range (TestEveryNumericFlagHasARange holds
// every numeric flag of verdryx to having one).
func rangeOf(ranges map[string]numRange, cmd *cobra.Command, f *pflag.Flag) (numRange, bool) {
	if !isNumeric(f) {
		return numRange{}, false
	}
	path := strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
	if r, ok := ranges[path+" --"+f.Name]; ok {
		return r, true
	}
	r, ok := ranges["--"+f.Name]
	return r, ok
}

// durationValue is a flag value holding a duration of its own type (one
// that reads days and weeks).
type durationValue interface{ Duration() time.Duration }

func isNumeric(f *pflag.Flag) bool {
	if _, ok := f.Value.(durationValue); ok {
		return true
	}
	switch f.Value.Type() {
	case "int", "int64", "uint64", "float64", "duration", "intSlice":
		return true
	}
	return false
}

// numbers returns the value of a numeric flag: durations in nanoseconds,
// a slice element by element.
func numbers(f *pflag.Flag) ([]float64, error) {
	if d, ok := f.Value.(durationValue); ok {
		return []float64{float64(d.Duration())}, nil
	}
	var text []string
	switch f.Value.Type() {
	case "intSlice":
		text = f.Value.(pflag.SliceValue).GetSlice()
	case "duration":
		d, err := time.ParseDuration(f.Value.String())
		return []float64{float64(d)}, err
	default:
		text = []string{f.Value.String()}
	}
	out := make([]float64, 0, len(text))
	for _, s := range text {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, x)
	}
	return out, nil
}

// checkFlagRange refuses a value of f outside its range (exit 2), naming
// the flag, the value and the range. where, when not empty, says where the
// value came from (a --config file and line).
func checkFlagRange(ranges map[string]numRange, cmd *cobra.Command, f *pflag.Flag, where string) error {
	r, ok := rangeOf(ranges, cmd, f)
	if !ok {
		return nil
	}
	xs, err := numbers(f)
	if err != nil {
		return usageErrorf("%s--%s %s: %v", where, f.Name, f.Value, err)
	}
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) || !r.ok(x) {
			return usageErrorf("%s--%s %s: want %s", where, f.Name, f.Value, r.want)
		}
	}
	return nil
}

// checkFlagRanges checks every numeric flag of cmd (given, from the
// environment or the default) against its range, before the command runs.
func checkFlagRanges(cmd *cobra.Command) error {
	ranges := flagRanges()
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil {
			err = checkFlagRange(ranges, cmd, f, "")
		}
	})
	return err
}
