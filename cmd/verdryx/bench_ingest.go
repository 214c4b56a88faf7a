package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/verdryx/verdryx/bench/ingest"
)

// newBenchIngestCmd maps the flags of `verdryx bench ingest` onto
// ingest.RunNDJSON and prints its figures.
func newBenchIngestCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ingest",
		Short: "benchmark per-call NDJSON ingest against encoding/json",
		Long: "Generate per-call NDJSON records (about 250 bytes each) into a temporary file or --file (an existing\n" +
			"--file is read as it is) and measure, in one run: encoding/json decoding each line (strictjson.Decode,\n" +
			"the decoder --input used before), the record decoder bare (calls.ScanNDJSON), the full cost-per-correct\n" +
			"--input reduction, and that reduction fed by encoding/json as it was. MB/s (10^6 bytes), allocations per\n" +
			"record and peak RSS; best of --rounds.",
	}
	fs := cmd.Flags()
	records := fs.Int("records", 1_000_000, "per-call records to generate")
	file := fs.String("file", "", "NDJSON file to measure: read if it exists, else generated there and kept (default: a temporary file, removed after)")
	rounds := fs.Int("rounds", 3, "measured passes of each kind; the best is reported")
	procs := fs.Int("procs", 1, "GOMAXPROCS during the measured passes (every pass is single-threaded)")
	asJSON := fs.Bool("json", false, "print the figures as JSON")
	cmd.RunE = func(cmd *cobra.Command, pos []string) error {
		ctx, stdout := cmd.Context(), cmd.OutOrStdout()
		if len(pos) > 0 {
			return usageErrorf("bench ingest: unexpected argument %q", pos[0])
		}
		if *records <= 0 || *rounds <= 0 || *procs <= 0 {
			return usageErrorf("bench ingest: --records, --rounds and --procs must be positive")
		}
		res, err := ingest.RunNDJSON(ctx, ingest.NDJSONOptions{Records: *records, File: *file, Rounds: *rounds, Procs: *procs})
		if err != nil {
			return err
		}
		if *asJSON {
			if err := writeJSON(stdout, res); err != nil {
				return err
			}
			return res.Check()
		}
		fmt.Fprintf(stdout, "bench ingest: %d records, %.1f MB (%.0f bytes/record)", res.Records, float64(res.Bytes)/1e6, float64(res.Bytes)/float64(max(res.Records, 1)))
		if res.Generated {
			fmt.Fprint(stdout, ", generated")
		}
		fmt.Fprintf(stdout, "; GOMAXPROCS=%d; best of %d\n", res.GOMAXPROCS, res.Rounds)
		for _, p := range []struct {
			name string
			p    ingest.Pass
		}{
			{"encoding/json bare (strictjson.Decode)", res.JSONBare},
			{"record decoder bare (ScanNDJSON)", res.DecoderBare},
			{"cost-per-correct --input", res.Input},
			{"--input via encoding/json (before)", res.JSONInput},
		} {
			fmt.Fprintf(stdout, "%-36s %7.1f MB/s  (%.3fs)  %5.2f allocs/record  peak RSS %.1f MiB\n",
				p.name, p.p.MBPerSec, p.p.Seconds, p.p.AllocsPerRecord, p.p.PeakRSSMiB)
		}
		fmt.Fprintf(stdout, "decoder / encoding/json: %.2fx; --input / encoding/json: %.2fx; --input / decoder: %.2f; --input now / before: %.2fx\n",
			res.DecoderOverJSON, res.InputOverJSON, res.InputOverDecoder, res.InputOverJSONInput)
		fmt.Fprintf(stdout, "reports equal: %v\n", res.ReportsEqual)
		return res.Check()
	}
	return cmd
}
