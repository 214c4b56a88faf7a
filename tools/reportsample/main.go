// Command reportsample writes the eval store behind the README's sample report:
// two eval sets, one significantly regressed run, one unmeasured case and
// one unmeasured run (see report/fixture).
//
//	go run ./tools/reportsample -db /tmp/verdryx-sample.db
//	verdryx report --db /tmp/verdryx-sample.db --traces testdata/traces/slo --out /tmp/verdryx-sample.html
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/verdryx/verdryx/report/fixture"
	"github.com/verdryx/verdryx/store"
)

func main() {
	db := flag.String("db", "verdryx-sample.db", "store file to create (must not exist)")
	flag.Parse()
	if err := run(*db); err != nil {
		slog.Error("sample store", "err", err)
		os.Exit(2)
	}
}

func run(path string) error {
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("-db %s: the file exists; remove it or name another", path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("-db %s: %w", path, err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	facts, err := fixture.Populate(ctx, st, fixture.Spec{Series: 2, Runs: 14, Cases: 10, Seed: 15, Regress: 11,
		UnmeasuredCase: true, UnmeasuredRun: 6, AgentID: "agent://acme.example/support/good"})
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %d series; regressed run %s; unmeasured case %s in run %s; unmeasured run %s\n",
		path, len(facts.Series), facts.RegressedRunID, facts.UnmeasuredCase, facts.UnmeasuredCaseRun, facts.UnmeasuredRunID)
	return nil
}
