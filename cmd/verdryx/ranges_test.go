package main

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// walkCommands calls fn for every command of a fresh command tree.
func walkCommands(t *testing.T, fn func(c *cobra.Command)) {
	t.Helper()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		fn(c)
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(newRoot(io.Discard, io.Discard))
}

// TestEveryNumericFlagHasARange walks every command: each numeric flag
// has a range in flagRanges, every default
// is inside it, and a value outside it is refused naming the flag and the
// range.
func TestEveryNumericFlagHasARange(t *testing.T) {
	ranges := flagRanges()
	numeric := 0
	walkCommands(t, func(c *cobra.Command) {
		require.NoError(t, checkFlagRanges(c), "%s: the defaults are in range", c.CommandPath())
		c.Flags().VisitAll(func(f *pflag.Flag) {
			if !isNumeric(f) {
				return
			}
			r, ok := rangeOf(ranges, c, f)
			require.True(t, ok, "%s --%s: a numeric flag without a range in flagRanges", c.CommandPath(), f.Name)
			numeric++
			refused := 0
			for _, v := range []string{"-1000000", "-1", "0", "1", "1000000", "NaN", "+Inf"} {
				if f.Value.Type() == "duration" {
					v = map[string]string{"-1000000": "-1000000h", "-1": "-1s", "0": "0s", "1": "1ns", "1000000": "1000000h", "NaN": "0s", "+Inf": "0s"}[v]
				}
				fc := newFlagCopy(t, c, f.Name)
				if err := fc.Flags().Set(f.Name, v); err != nil {
					// The flag's own parser refuses it (NaN for an
					// integer; 0 for a window, which cobra reports
					// naming the flag).
					if _, ok := f.Value.(durationValue); ok {
						refused++
					}
					continue
				}
				err := checkFlagRanges(fc)
				if err == nil {
					continue
				}
				refused++
				var ee *exitError
				require.True(t, errors.As(err, &ee) && ee.code == exitUsage, "%s --%s %s: exit 2, have %v", c.CommandPath(), f.Name, v, err)
				require.True(t, strings.HasPrefix(err.Error(), "--"+f.Name+" "), "the message starts with the flag: %v", err)
				require.Contains(t, err.Error(), "want "+r.want)
			}
			if f.Name != "seed" {
				require.Positive(t, refused, "%s --%s: some value is out of range", c.CommandPath(), f.Name)
			}
		})
	})
	require.Greater(t, numeric, 80, "the walk saw the numeric flags")
}

// newFlagCopy returns the command of path's fresh tree, so that one
// check's Set does not leak into the next.
func newFlagCopy(t *testing.T, c *cobra.Command, _ string) *cobra.Command {
	t.Helper()
	path := strings.Fields(c.CommandPath())[1:]
	fc, _, err := newRoot(io.Discard, io.Discard).Find(path)
	require.NoError(t, err)
	return fc
}

func TestRangesOfTheIssue(t *testing.T) {
	cases := []struct {
		args []string
		want string // "" means accepted
	}{
		{[]string{"serve", "--replicas", "99"}, "--replicas 99: want 1 to 5"},
		{[]string{"serve", "--replicas", "0"}, "--replicas 0: want 1 to 5"},
		{[]string{"serve", "--replicas", "5"}, ""},
		{[]string{"serve", "--partitions", "0"}, "--partitions 0: want at least 1"},
		{[]string{"serve", "--partitions", "-3"}, "--partitions -3: want at least 1"},
		{[]string{"replay", "--replicas", "6"}, "--replicas 6: want 1 to 5"},
		{[]string{"serve", "--start-timeout", "0s"}, "--start-timeout 0s: want a duration greater than 0"},
		{[]string{"serve", "--slo-every", "0s"}, ""},
		{[]string{"serve", "--max-cost-usd", "-0.5"}, "--max-cost-usd -0.5: want at least 0"},
		{[]string{"serve", "--max-record-bytes", "0"}, "--max-record-bytes 0: want -1 (no limit) or at least 1"},
		{[]string{"serve", "--max-record-bytes", "-1"}, ""},
		{[]string{"eval", "--concurrency", "0"}, "--concurrency 0: want at least 1"},
		{[]string{"eval", "--cost-limit-usd", "-1"}, "--cost-limit-usd -1: want at least 0"},
		{[]string{"eval", "--cost-limit-usd", "+Inf"}, "--cost-limit-usd +Inf: want"},
		{[]string{"eval", "--fail-under", "-1"}, ""},
		{[]string{"eval", "--fail-under", "NaN"}, "--fail-under NaN: want a finite number"},
		{[]string{"ask", "--top-k", "0"}, "--top-k 0: want 1 to 20"},
		{[]string{"slo", "--target", "1"}, "--target 1: want between 0 and 1, exclusive"},
		{[]string{"cost-per-correct", "--procs", "0"}, ""},
		{[]string{"bench", "ingest-docs", "--sizes", "10,0"}, "--sizes [10,0]: want at least 1"},
		{[]string{"tail", "--poll", "0s"}, "--poll 0s: want a duration"},
	}
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			cmd, rest, err := newRoot(io.Discard, io.Discard).Find(c.args)
			require.NoError(t, err)
			require.NoError(t, cmd.ParseFlags(rest))
			err = checkFlagRanges(cmd)
			if c.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, c.want)
		})
	}
}

// TestOutOfRangeExitsTwoBeforeAnyWork runs the commands: serve with
// --replicas 99 exits 2 at once (it used to retry for --start-timeout and
// exit 3, which the unit restarted for ever), eval with --concurrency 0
// too, and a --config value out of range names the file and line.
func TestOutOfRangeExitsTwoBeforeAnyWork(t *testing.T) {
	data := t.TempDir()
	for _, args := range [][]string{
		{"serve", "--data", data, "--replicas", "99", "--start-timeout", "10m", "--http", "", "--nats-listen", "127.0.0.1:0"},
		{"serve", "--data", data, "--partitions", "0"},
		{"eval", "--data", data, "testdata/grimoire/evalset.json", "--concurrency", "0"},
	} {
		start := time.Now()
		var out, errOut bytes.Buffer
		err := run(t.Context(), args, &out, &errOut)
		require.Equal(t, exitUsage, report(err, &errOut), "%v: %v", args, err)
		require.Less(t, time.Since(start), 5*time.Second, "refused before any work")
		require.Contains(t, errOut.String(), ": want ")
	}
	p := writeConfig(t, "http: \"\"\nreplicas: 9\n")
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"serve", "--data", data, "--config", p}, &out, &errOut)
	require.Equal(t, exitUsage, report(err, &errOut))
	require.Contains(t, errOut.String(), p+`:2: key "replicas": --replicas 9: want 1 to 5`)
}

func TestWindowsTakeDaysAndWeeks(t *testing.T) {
	for in, want := range map[string]time.Duration{"60d": 60 * 24 * time.Hour, "2w": 14 * 24 * time.Hour, "36h": 36 * time.Hour} {
		cmd, rest, err := newRoot(io.Discard, io.Discard).Find([]string{"serve", "--slo-window", in, "--retention", in})
		require.NoError(t, err)
		require.NoError(t, cmd.ParseFlags(rest))
		for _, name := range []string{"slo-window", "retention"} {
			d := cmd.Flags().Lookup(name).Value.(durationValue).Duration()
			require.Equal(t, want, d, "--%s %s", name, in)
		}
	}
	cmd, rest, err := newRoot(io.Discard, io.Discard).Find([]string{"serve"})
	require.NoError(t, err)
	require.Error(t, cmd.ParseFlags(append(rest, "--slo-window", "0d")))
	require.Equal(t, "1w", cmd.Flags().Lookup("slo-window").DefValue, "the default reads as a window")
}
