// Command duckdb-reduction is the DuckDB side of bench-tools/reduction.sh:
// the reduction `verdryx cost-per-correct --traces DIR` makes, as one SQL
// query DuckDB runs over the same TokenFuse Parquet segments.
//
// It lives in its own module so that verdryx's module stays pure Go: the
// DuckDB driver needs cgo (gcc) and links DuckDB's static library.
//
//	cd bench-tools/duckdb && CGO_ENABLED=1 go build -o /tmp/duckdb-reduction .
//	/tmp/duckdb-reduction --traces DIR --threads 2 [--order step|full]
//
// It prints one JSON line per outcome (runs, calls, blocked calls, cost in
// micro-USD), untagged as "(untagged)", in the order of outcome names, and
// on stderr the time of the query alone.
package main

import (
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
)

// query is the reduction: a run's outcome is its last non-empty outcome
// ordered by step (null reads as 0), then by the read order of the
// directory (segment by nanos then seq, then row); every call counts in its
// run, blocked calls (the nine breaker decisions) add no cost. Runs are
// then grouped by outcome. The first %s is the segments' glob, the second
// the ordering key: (step, nanos, seq, row), or step alone (--order step),
// which is the same reduction on directories where no run repeats a step,
// such as tracegen's, and cheaper.
const query = `
WITH c AS (
  SELECT run_id, outcome,
         coalesce(cost_microusd, 0) AS cost,
         decision IN ('budget_exceeded', 'policy_violation', 'loop_detected', 'killed', 'wasm_policy',
                      'taint_blocked', 'dlp_blocked', 'unit_budget_exceeded', 'identity_mismatch') AS blocked,
         coalesce(step, 0) AS step,
         lpad(split_part(parse_filename(filename, true), '-', 3), 16, '0') AS nanos,
         split_part(parse_filename(filename, true), '-', 4) AS seq,
         file_row_number AS row
  FROM read_parquet('%s', filename = true, file_row_number = true)
),
runs AS (
  SELECT arg_max(outcome, %s) FILTER (WHERE outcome IS NOT NULL AND outcome <> '') AS outcome,
         count(*) AS calls,
         count(*) FILTER (WHERE blocked) AS blocked,
         sum(cost) FILTER (WHERE NOT blocked) AS cost
  FROM c GROUP BY run_id
)
SELECT coalesce(outcome, '(untagged)') AS outcome, count(*) AS runs, sum(calls)::BIGINT AS calls,
       sum(blocked)::BIGINT AS blocked, coalesce(sum(cost), 0)::BIGINT AS cost
FROM runs GROUP BY 1 ORDER BY 1`

func main() {
	traces := flag.String("traces", "", "directory of calls-*.parquet segments")
	threads := flag.Int("threads", 2, "DuckDB threads")
	order := flag.String("order", "step", "ordering key of a run's calls: full (step, then read order) or step (step alone: the same result when no run repeats a step)")
	flag.Parse()
	key := map[string]string{"full": "(step, nanos, seq, row)", "step": "step"}[*order]
	if key == "" {
		fmt.Fprintln(os.Stderr, "duckdb-reduction: --order is full or step")
		os.Exit(2)
	}
	if *traces == "" {
		fmt.Fprintln(os.Stderr, "usage: duckdb-reduction --traces DIR [--threads N]")
		os.Exit(2)
	}
	if err := run(*traces, *threads, key); err != nil {
		fmt.Fprintln(os.Stderr, "duckdb-reduction:", err)
		os.Exit(1)
	}
}

func run(dir string, threads int, key string) error {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.Exec(fmt.Sprintf("SET threads = %d", threads)); err != nil {
		return err
	}
	glob := filepath.Join(dir, "calls-*.parquet")
	start := time.Now()
	rows, err := db.Query(fmt.Sprintf(query, strings.ReplaceAll(glob, "'", "''"), key))
	if err != nil {
		return err
	}
	defer rows.Close()
	type line struct {
		Outcome string `json:"outcome"`
		Runs    int64  `json:"runs"`
		Calls   int64  `json:"calls"`
		Blocked int64  `json:"blocked_calls"`
		Cost    int64  `json:"total_cost_microusd"`
	}
	var out []line
	for rows.Next() {
		var l line
		if err := rows.Scan(&l.Outcome, &l.Runs, &l.Calls, &l.Blocked, &l.Cost); err != nil {
			return err
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "query %.3f s\n", time.Since(start).Seconds())
	enc := json.NewEncoder(os.Stdout)
	for _, l := range out {
		if err := enc.Encode(l); err != nil {
			return err
		}
	}
	return nil
}
