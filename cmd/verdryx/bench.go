package main

import "github.com/spf13/cobra"

// newBenchCmd holds the benchmark commands. Each prints its figures and the
// ratio to the reference it measures in the same run.
func newBenchCmd() *cobra.Command {
	return newGroupCmd("bench", "benchmarks: traces, index, worker, ingest, ingest-docs, chain, chaos, cluster",
		newBenchTracesCmd(), newBenchIndexCmd(), newBenchWorkerCmd(), newBenchIngestCmd(), newBenchIngestDocsCmd(), newBenchChainCmd(), newBenchChaosCmd(), newBenchClusterCmd(), newBenchSoakCmd())
}
