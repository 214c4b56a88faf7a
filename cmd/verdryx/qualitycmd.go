package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/qualitylog"
	"github.com/verdryx/verdryx/store"
	"github.com/verdryx/verdryx/streams"
)

// historyNote says how far st has applied the fleet's quality log, ""
// for a store that never read it.
func historyNote(ctx context.Context, st *store.Store) string {
	ls, err := st.LogState(ctx)
	if err != nil || !ls.Known || (ls.Applied == 0 && ls.Last == 0) {
		return ""
	}
	s := fmt.Sprintf("quality log: applied through record %d of %d", ls.Applied, ls.Last)
	if b := ls.Behind(); b > 0 {
		s += fmt.Sprintf(" (%d behind", b)
	} else {
		s += " (caught up"
	}
	if !ls.CheckedAt.IsZero() {
		s += " as of " + ls.CheckedAt.Format(time.RFC3339)
	}
	s += ")"
	if ls.Missed > 0 {
		s += fmt.Sprintf("; %d records were pruned from the log before this store read them", ls.Missed)
	}
	return s
}

// openQualityLog connects to NATS at nf and binds the fleet's quality log
// to st; close disconnects.
func openQualityLog(ctx context.Context, nf natsFlags, st *store.Store, name string) (lg *qualitylog.Log, closeFn func(), err error) {
	if err := checkNATSURL(*nf.url); err != nil {
		return nil, nil, err
	}
	nc, err := nf.connect(*nf.url, name)
	if err != nil {
		return nil, nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, nil, serviceError(err)
	}
	lg, err = qualitylog.Open(ctx, js, streams.DefaultSubjects(), st, qualitylog.Options{})
	if err != nil {
		nc.Close()
		return nil, nil, serviceError(fmt.Errorf("quality log: %w", err))
	}
	return lg, nc.Close, nil
}

// newStoreSyncCmd keeps a standalone store caught up from the fleet's
// quality log (a console's verdryx.db on another host).
func newStoreSyncCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "sync",
		Short: "apply the fleet's quality log to a store (every worker's runs and baselines)",
		Long: "Apply the fleet's quality log (stream VERDRYX_QUALITY) to the store (--db, $VERDRYX_DB, $TAIPAN_HOME/verdryx.db,\n" +
			"<data>/verdryx.db; created when missing): every run and baseline any worker committed, once each, in log order,\n" +
			"from where the store left off. Without --follow it stops at the log's end as it was when it started;\n" +
			"with --follow it keeps applying until interrupted. Exit 0: applied; 2: usage or store error; 3: NATS unreachable.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	db := addDBFlag(fs)
	nf := addNATSFlags(fs, "", "NATS server URL of the fleet (required; $NATS_URL)")
	follow := fs.Bool("follow", false, "keep applying the log as records arrive, until interrupted")
	asJSON := fs.Bool("json", false, "print what was applied as JSON")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if *nf.url == "" {
			return usageErrorf("store sync: --nats is required (the fleet's NATS server)")
		}
		st, err := openEvalStore(ctx, cmd.ErrOrStderr(), *db, g.data, storeWrite)
		if err != nil {
			return err
		}
		defer st.Close()
		lg, closeNC, err := openQualityLog(ctx, nf, st, "verdryx-store-sync")
		if err != nil {
			return err
		}
		defer closeNC()
		stats, err := lg.Sync(ctx)
		if err != nil {
			return serviceError(err)
		}
		if *asJSON {
			if err := writeJSON(stdout, stats); err != nil {
				return err
			}
		} else {
			printSync(stdout, st.Path(), stats, historyNote(ctx, st))
		}
		if *follow {
			return lg.Follow(ctx)
		}
		return nil
	}
	return cmd
}

func printSync(w io.Writer, path string, s qualitylog.Stats, note string) {
	fmt.Fprintf(w, "synced %s: %d new, %d already held, %d baselines without their run, %d unreadable records passed over\n",
		path, s.Applied[store.AppliedNew], s.Applied[store.AppliedPresent], s.Applied[store.AppliedOrphan], s.Skipped)
	if note != "" {
		fmt.Fprintln(w, note)
	}
}

// recordBaseline records the baseline p on the fleet's quality log, reads
// the log through it, and says whether its label still names it (another
// worker's baseline of the same label later in the log supersedes it).
func recordBaseline(ctx context.Context, lg *qualitylog.Log, st *store.Store, p store.Put) (superseded *store.Put, err error) {
	if _, err := lg.Publish(ctx, store.KindBaseline, p.ID); err != nil {
		return nil, serviceError(err)
	}
	if _, err := lg.Sync(ctx); err != nil {
		return nil, serviceError(err)
	}
	if p.Label == "" {
		return nil, nil
	}
	now, err := st.Baseline(ctx, p.Label)
	if err != nil {
		return nil, err
	}
	if now.ID == p.ID {
		return nil, nil
	}
	return &store.Put{Baseline: now}, nil
}
