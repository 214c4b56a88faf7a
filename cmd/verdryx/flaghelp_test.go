package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
)

// toyCmd is a command with a grouped flag, an ungrouped one, a repeatable
// one and an environment default, recording what its RunE saw.
func toyCmd(t *testing.T, got *map[string]any) *cobra.Command {
	t.Helper()
	c := &cobra.Command{Use: "toy", Long: "a toy command", SilenceErrors: true, SilenceUsage: true}
	fs := c.Flags()
	nats := fs.String("nats", "nats://from-env:4222", "the NATS URL ($NATS_URL)")
	models := fs.StringArray("allow-model", nil, "a model eval requests may name (repeatable)")
	every := fs.Duration("snapshot-every", 0, "a tuning knob "+strings.Repeat("with a long description ", 8))
	once := fs.Bool("once", false, "exit when drained")
	c.RunE = func(*cobra.Command, []string) error {
		*got = map[string]any{"nats": *nats, "allow-model": *models, "snapshot-every": every.String(), "once": *once}
		return nil
	}
	groupFlags(c, []flagGroup{{"Inputs", []string{"once"}}, {"NATS", []string{"nats", "allow-model"}}})
	return c
}

func runToy(t *testing.T, args ...string) (string, map[string]any, error) {
	t.Helper()
	var got map[string]any
	c := toyCmd(t, &got)
	var out bytes.Buffer
	c.SetOut(&out)
	c.SetErr(&out)
	c.SetArgs(args)
	err := c.Execute()
	return out.String(), got, err
}

func TestGroupedHelpListsTheGroupsAndPointsAtHelpAll(t *testing.T) {
	out, _, err := runToy(t, "--help")
	require.NoError(t, err)
	require.Contains(t, out, "Inputs:\n      --once")
	require.Contains(t, out, "NATS:\n")
	require.Less(t, strings.Index(out, "--nats"), strings.Index(out, "--allow-model"), "a group keeps its order")
	require.NotContains(t, out, "--snapshot-every", "ungrouped flags are left to --help-all")
	require.Contains(t, out, "1 more flags (tuning, security, benchmarks): toy --help-all")

	all, got, err := runToy(t, "--help-all")
	require.NoError(t, err)
	require.Nil(t, got, "--help-all prints and runs nothing")
	require.Contains(t, all, "Other flags:\n      --snapshot-every")
	for _, line := range strings.Split(all, "\n") {
		require.LessOrEqual(t, len(line), helpWidth, "help wraps at %d columns: %q", helpWidth, line)
	}
}

func TestGroupFlagsRefusesAGroupNamingNoFlag(t *testing.T) {
	c := &cobra.Command{Use: "toy", RunE: func(*cobra.Command, []string) error { return nil }}
	c.Flags().Bool("once", false, "")
	groupFlags(c, []flagGroup{{"Inputs", []string{"onec"}}})
	c.SetOut(&bytes.Buffer{})
	c.SetArgs([]string{"--help"})
	require.PanicsWithValue(t, `toy: help group "Inputs" names unknown flag --onec`, func() { _ = c.Execute() })
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "verdryx.yaml")
	require.NoError(t, os.WriteFile(p, []byte(body), 0o600))
	return p
}

func TestConfigSetsFlagsTheCommandLineDidNot(t *testing.T) {
	p := writeConfig(t, "# a worker\nnats: nats://from-config:4222\nallow-model: [openai:gpt-4o-mini, claude-sonnet-4-5]\nsnapshot-every: 2s\nonce: true\n")
	_, got, err := runToy(t, "--config", p)
	require.NoError(t, err)
	require.Equal(t, map[string]any{
		"nats": "nats://from-config:4222", "allow-model": []string{"openai:gpt-4o-mini", "claude-sonnet-4-5"},
		"snapshot-every": "2s", "once": true,
	}, got, "the file wins over the environment's defaults")

	_, got, err = runToy(t, "--config", p, "--nats", "nats://cli:4222", "--allow-model", "stub")
	require.NoError(t, err)
	require.Equal(t, "nats://cli:4222", got["nats"], "the command line wins over the file")
	require.Equal(t, []string{"stub"}, got["allow-model"], "a repeated flag on the command line is not extended by the file")
	require.Equal(t, "2s", got["snapshot-every"])
}

func TestConfigErrorsNameTheFileLineAndKey(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"unknown key":           {"nats: x\nsnapshot_every: 2s\n", `:2: key "snapshot_every": not a flag of this command`},
		"value refused":         {"snapshot-every: soon\n", `:1: key "snapshot-every": invalid argument "soon"`},
		"list for a plain flag": {"nats: [a, b]\n", `:1: key "nats": --nats takes one value, not a list`},
		"twice":                 {"once: true\nonce: false\n", `:2: key "once": given twice`},
		"not a mapping":         {"- nats\n", `:1: want a mapping`},
		"nested":                {"nats:\n  url: x\n", `:1: key "nats": want a value or a list of values`},
		"config in config":      {"config: other.yaml\n", `:1: key "config": not a flag`},
		"unclosed list":         {"once: true\nnats: [a\n", `:2: did not find expected ',' or ']'`},
		"tab":                   {"once: true\nnats: a\n\tx: b\n", `:3: found a tab character`},
		"unknown alias":         {"once: true\n\nnats: *url\n", `:3: unknown anchor 'url' referenced`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := writeConfig(t, c.body)
			_, got, err := runToy(t, "--config", p)
			require.Error(t, err)
			require.Nil(t, got, "nothing runs on a bad config")
			require.Contains(t, err.Error(), p+c.want)
			var ee *exitError
			require.ErrorAs(t, err, &ee)
			require.Equal(t, exitUsage, ee.code, "a bad config file is an input error")
		})
	}
	_, _, err := runToy(t, "--config", filepath.Join(t.TempDir(), "missing.yaml"))
	require.ErrorContains(t, err, "--config: open ")
	_, got, err := runToy(t, "--config", writeConfig(t, ""))
	require.NoError(t, err, "an empty file sets nothing")
	require.Equal(t, "nats://from-env:4222", got["nats"])
}

// TestServeHelpIsAFirstDeployment holds serve --help to what issue 47
// asked: at most 25 flags, grouped, no line over helpWidth columns, the
// rest behind --help-all.
func TestServeHelpIsAFirstDeployment(t *testing.T) {
	var out, errOut bytes.Buffer
	require.NoError(t, run(t.Context(), []string{"serve", "--help"}, &out, &errOut))
	help := out.String()
	flags := 0
	for _, line := range strings.Split(help, "\n") {
		require.LessOrEqual(t, len(line), helpWidth, "%q", line)
		if strings.HasPrefix(strings.TrimSpace(line), "--") || strings.HasPrefix(strings.TrimSpace(line), "-h, --") {
			flags++
		}
	}
	require.LessOrEqual(t, flags, 25, help)
	for _, g := range []string{"Inputs:", "NATS:", "Outputs:", "Models:"} {
		require.Contains(t, help, "\n"+g+"\n")
	}
	require.Contains(t, help, "serve --help-all")
	require.NotContains(t, help, "--snapshot-every")

	out.Reset()
	require.NoError(t, run(t.Context(), []string{"serve", "--help-all"}, &out, &errOut))
	require.Contains(t, out.String(), "--snapshot-every")
	require.Contains(t, out.String(), "--data", "inherited flags are listed too")
}
