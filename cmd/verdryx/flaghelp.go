package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// helpWidth is the column flag descriptions are wrapped at in help.
const helpWidth = 100

// flagGroup is a titled set of flags a command's --help shows together.
type flagGroup struct {
	title string
	names []string
}

// groupFlags makes c's --help list only the groups' flags, each group under
// its title, wrapped at helpWidth columns, and adds --help-all, which lists
// every flag. Flags outside the groups are still accepted; they are listed
// by --help-all only. It also adds --config FILE (see applyConfig). Help
// panics when a group names a flag c does not have (its own or one it
// inherits): the groups are written by hand beside the flags and a test
// prints every grouped command's help.
func groupFlags(c *cobra.Command, groups []flagGroup) {
	fs := c.Flags()
	helpAll := fs.Bool("help-all", false, "list every flag, not only those of a first deployment")
	config := fs.String("config", "", "read flags from a YAML file whose keys are the long flag names (the command line wins over it, it wins over the environment)")
	groups = append(groups, flagGroup{title: "Help and configuration", names: []string{"config", "help-all", "help"}})
	c.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		printGroupedHelp(cmd.OutOrStdout(), cmd, groups, false)
	})
	run := c.RunE
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if *helpAll {
			printGroupedHelp(cmd.OutOrStdout(), cmd, groups, true)
			return nil
		}
		if *config != "" {
			if err := applyConfig(cmd, *config); err != nil {
				return err
			}
		}
		return run(cmd, args)
	}
}

// printGroupedHelp writes c's help: its long description, usage line, the
// groups' flags, and with all the rest of its flags as "Other flags".
func printGroupedHelp(w io.Writer, c *cobra.Command, groups []flagGroup, all bool) {
	var b bytes.Buffer
	long := c.Long
	if long == "" {
		long = c.Short
	}
	fmt.Fprintf(&b, "%s\n\nUsage:\n  %s [flags]\n", strings.TrimSpace(long), c.CommandPath())
	fs := pflag.NewFlagSet(c.Name(), pflag.ContinueOnError)
	fs.AddFlagSet(c.LocalFlags())
	fs.AddFlagSet(c.InheritedFlags())
	listed := map[string]bool{}
	for _, g := range groups {
		set := pflag.NewFlagSet(g.title, pflag.ContinueOnError)
		for _, n := range g.names {
			f := fs.Lookup(n)
			if f == nil && n != "help" {
				panic(fmt.Sprintf("%s: help group %q names unknown flag --%s", c.Name(), g.title, n))
			}
			if f != nil && !listed[n] {
				set.AddFlag(f)
				listed[n] = true
			}
		}
		set.SortFlags = false
		fmt.Fprintf(&b, "\n%s:\n%s", g.title, set.FlagUsagesWrapped(helpWidth))
	}
	rest := pflag.NewFlagSet("other", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if !listed[f.Name] && !f.Hidden {
			rest.AddFlag(f)
		}
	})
	if rest.HasFlags() {
		if all {
			fmt.Fprintf(&b, "\nOther flags:\n%s", rest.FlagUsagesWrapped(helpWidth))
		} else {
			n := 0
			rest.VisitAll(func(*pflag.Flag) { n++ })
			fmt.Fprintf(&b, "\n%d more flags (tuning, security, benchmarks): %s --help-all\n", n, c.CommandPath())
		}
	}
	_, _ = w.Write(b.Bytes())
}

// applyConfig sets every flag of fs named by a key of the YAML mapping in
// path, unless the flag was given on the command line. A value is a
// scalar, or a sequence for a flag that repeats. An unknown key, a key
// given twice, a value the flag refuses, or a file that is not a mapping is
// an input error naming the file, the line and the key; so is a numeric
// value outside the flag's range (see flagRanges) and a file that is not
// YAML.
func applyConfig(cmd *cobra.Command, path string) error {
	fs := cmd.Flags()
	raw, err := os.ReadFile(path)
	if err != nil {
		return inputError(fmt.Errorf("--config: %w", err))
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return yamlError(path, raw, err)
	}
	ranges := flagRanges()
	if len(doc.Content) == 0 {
		return nil // an empty file sets nothing
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return inputError(fmt.Errorf("--config %s:%d: want a mapping of flag names to values", path, root.Line))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		where := fmt.Sprintf("--config %s:%d: key %q", path, k.Line, k.Value)
		f := fs.Lookup(k.Value)
		if k.Kind != yaml.ScalarNode || f == nil || k.Value == "config" || k.Value == "help-all" || k.Value == "help" {
			return inputError(fmt.Errorf("%s: not a flag of this command (keys are long flag names without the dashes)", where))
		}
		if seen[k.Value] {
			return inputError(fmt.Errorf("%s: given twice", where))
		}
		seen[k.Value] = true
		if f.Changed {
			continue // the command line wins
		}
		var values []string
		switch v.Kind {
		case yaml.ScalarNode:
			values = []string{v.Value}
		case yaml.SequenceNode:
			if !isRepeatable(f) {
				return inputError(fmt.Errorf("%s: --%s takes one value, not a list", where, f.Name))
			}
			for _, e := range v.Content {
				if e.Kind != yaml.ScalarNode {
					return inputError(fmt.Errorf("%s: line %d: want a plain value", where, e.Line))
				}
				values = append(values, e.Value)
			}
		default:
			return inputError(fmt.Errorf("%s: want a value or a list of values", where))
		}
		if isRepeatable(f) {
			// A list replaces the environment's default rather than adding to it.
			if sv, ok := f.Value.(pflag.SliceValue); ok {
				if err := sv.Replace(nil); err != nil {
					return inputError(fmt.Errorf("%s: %w", where, err))
				}
			}
		}
		for _, s := range values {
			if err := fs.Set(f.Name, s); err != nil {
				return inputError(fmt.Errorf("%s: %w", where, err))
			}
		}
		if err := checkFlagRange(ranges, cmd, f, where+": "); err != nil {
			return err
		}
	}
	return nil
}

// yamlError places a YAML error of the --config file path at its line:
// "--config FILE:LINE: what". yaml.v3's own "line N" is not reliable (the
// start of the enclosing construct, 0-based for parser errors, absent on
// the first line and for an unknown alias), so the line is the first one
// at which the file's prefix fails with the same problem.
func yamlError(path string, raw []byte, err error) error {
	problem := func(err error) string {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		if m := regexp.MustCompile(`^line \d+: `).FindString(msg); m != "" {
			msg = msg[len(m):]
		}
		return msg
	}
	want := problem(err)
	lines := bytes.SplitAfter(raw, []byte("\n"))
	if len(lines) <= maxConfigLinesSearched {
		var prefix []byte
		for i, l := range lines {
			prefix = append(prefix, l...)
			var doc yaml.Node
			if err := yaml.Unmarshal(prefix, &doc); err != nil && problem(err) == want {
				return inputError(fmt.Errorf("--config %s:%d: %s", path, i+1, want))
			}
		}
	}
	return inputError(fmt.Errorf("--config %s: %s", path, strings.TrimPrefix(err.Error(), "yaml: ")))
}

// maxConfigLinesSearched bounds the prefixes yamlError parses.
const maxConfigLinesSearched = 2000

// isRepeatable reports whether f takes a value each time it is given and
// keeps them all (a string slice or array flag).
func isRepeatable(f *pflag.Flag) bool {
	_, ok := f.Value.(pflag.SliceValue)
	return ok
}
