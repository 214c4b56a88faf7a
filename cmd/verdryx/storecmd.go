package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/store"
)

// newStoreCmd groups the commands about the store file itself.
func newStoreCmd(g *globals) *cobra.Command {
	return newGroupCmd("store", "inspect, migrate or sync the store file (verdryx.db)", newStoreCheckCmd(g), newStoreMigrateCmd(g), newStoreSyncCmd(g))
}

// newStoreCheckCmd says what a store file holds and what opening it would
// do, without changing it. Exit 0 when verdryx can open it, 2 when it
// would be refused (or there is no file).
func newStoreCheckCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check",
		Short: "say which schema the store has and what opening it would do (changes nothing)",
		Long: "Read the store (--db, $VERDRYX_DB, $TAIPAN_HOME/verdryx.db, <data>/verdryx.db) read-only and say which schema it has:\n" +
			"verdryx's, the Python verdryx's (migrated in place, after a copy, by the first command that writes), empty, or another\n" +
			"(refused, untouched). Exit 0: verdryx can open it; 2: it would be refused, or there is no file.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	asJSON := fs.Bool("json", false, "print the shape as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		path := dbPath(*db, g.data)
		sh, err := store.Inspect(cmd.Context(), path)
		if err != nil {
			return inputError(err)
		}
		if *asJSON {
			if err := writeJSON(cmd.OutOrStdout(), struct {
				Path string `json:"path"`
				store.Shape
			}{path, sh}); err != nil {
				return err
			}
		} else {
			printShape(cmd.OutOrStdout(), path, sh)
		}
		if sh.Kind == store.KindUnknown {
			return inputError(fmt.Errorf("store %s would be refused: %s", path, sh.Problem))
		}
		return nil
	}
	return cmd
}

// printShape prints what store check found.
func printShape(w io.Writer, path string, sh store.Shape) {
	fmt.Fprintf(w, "store %s\n", path)
	kind := map[store.Kind]string{
		store.KindEmpty:   "empty (no tables)",
		store.KindCurrent: fmt.Sprintf("verdryx's (schema %d, on the Python verdryx's tables)", sh.Version),
		store.KindPython:  "the Python verdryx's, without the unanswered table",
		store.KindUnknown: "not one verdryx reads: " + sh.Problem,
	}[sh.Kind]
	if sh.Kind == store.KindPython && sh.Unanswered {
		kind = "the Python verdryx's, with the unanswered table"
	}
	fmt.Fprintf(w, "  schema        %s\n", kind)
	fmt.Fprintf(w, "  user_version  %d\n", sh.UserVersion)
	fmt.Fprintf(w, "  tables        %s\n", strings.Join(sh.Tables, ", "))
	if sh.Rows != nil {
		fmt.Fprintf(w, "  rows          %d runs, %d scores, %d unanswered, %d baselines\n",
			sh.Rows["eval_runs"], sh.Rows["scores"], sh.Rows["unanswered"], sh.Rows["baselines"])
	}
	does := map[store.Kind]string{
		store.KindEmpty:   "a command that writes (eval, baseline, serve) creates the schema",
		store.KindCurrent: "every command opens it as it is",
		store.KindPython: "the first command that writes (eval, baseline, serve, store migrate) copies the file beside it and migrates it in place,\n" +
			"                keeping every row; read-only commands (runs, baselines, drift, report) refuse it until then",
		store.KindUnknown: "every command refuses it and leaves it as it is",
	}[sh.Kind]
	fmt.Fprintf(w, "  opening it    %s\n", does)
}

// newStoreMigrateCmd migrates a Python verdryx's store in place, after a
// copy; a store already verdryx's is left as it is.
func newStoreMigrateCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "migrate a store the Python verdryx wrote, in place, after a copy beside it",
		Long: "Open the store for writing, which migrates a store the Python verdryx wrote in one transaction, after copying the file\n" +
			"beside it (named on stderr); every run, score and baseline keeps its id and values, and the Python verdryx can still\n" +
			"open the file. A store already verdryx's is left as it is; any other file is refused untouched (exit 2).",
		Args: cobra.NoArgs,
	}
	db := addDBFlag(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		st, err := openEvalStore(cmd.Context(), cmd.ErrOrStderr(), *db, g.data, storeWriteExisting)
		if err != nil {
			return err
		}
		defer st.Close()
		if st.Migrated() == nil {
			fmt.Fprintf(cmd.OutOrStdout(), "store %s already has verdryx's schema: nothing to do\n", st.Path())
			return nil
		}
		fmt.Fprintf(cmd.OutOrStdout(), "store %s migrated; the file as it was is at %s\n", st.Path(), st.Migrated().Backup)
		return nil
	}
	return cmd
}
