package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/index"
)

// newIndexVerifyCmd makes index verify, which checks every byte of a
// generation (index.Store.Verify): what opening one does not.
func newIndexVerifyCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "verify [GENERATION]",
		Short: "check every file of an index generation against its manifest",
		Long: "Read every file of a generation (the active one, or GENERATION) in full and check it against its\n" +
			"manifest: each file's SHA-256, the ids (distinct, one a line), every int8 code and row scale, and every\n" +
			"row's norm. Opening a generation (ask, serve) checks only the manifest and the files' sizes; a build\n" +
			"verifies before it activates. Exit 0 when it verifies, 2 when it does not (the error names the file and row).",
	}
	asJSON := cmd.Flags().Bool("json", false, "print the verified manifest as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		if len(pos) > 1 {
			return usageErrorf("index verify: want at most one generation, have %d", len(pos))
		}
		id := "active"
		if len(pos) == 1 {
			id = pos[0]
		}
		m, err := index.NewStore(g.data, index.StoreOptions{}).Verify(id)
		if errors.Is(err, index.ErrCorrupt) || errors.Is(err, index.ErrNoActive) || errors.Is(err, index.ErrUnsafePath) {
			return inputError(err)
		}
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(cmd.OutOrStdout(), m)
		}
		fmt.Fprintf(cmd.OutOrStdout(), "generation %s verifies: %d rows, %d dims, %d files, fingerprint %s\n", m.ID, m.Count, m.Dims, len(m.Files)+1, m.Fingerprint)
		return nil
	}
	return cmd
}
