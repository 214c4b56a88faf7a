#!/usr/bin/env bash
# The trace reduction against DuckDB, in one script: `verdryx
# cost-per-correct --traces DIR` and the same reduction as one DuckDB query
# (bench-tools/duckdb, its own Go module: the driver needs cgo), over 10M
# generated interleaved rows (100,000 runs, every run in flight: the
# in-flight-all shape of `verdryx bench traces`), generated once under DIR
# (default /tmp/vx-reduction) and reused. ROUNDS rounds (default 7), the
# three commands alternating in a rotating order; each time is a whole
# process (start, read, reduce, print), wall clock. The reports are
# compared first: all three must give the same runs, calls, blocked calls
# and cost per outcome.
#
#   bench-tools/reduction.sh [ROUNDS] [DIR]
#
# Needs gcc (cgo) for the DuckDB side; DuckDB runs with 2 threads (THREADS),
# verdryx with its default --procs (GOMAXPROCS).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-7}
dir=${2:-/tmp/vx-reduction}
threads=${THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -trimpath -o "$tmp/verdryx" ./cmd/verdryx
(cd bench-tools/duckdb && CGO_ENABLED=1 go build -trimpath -o "$tmp/duckdb-reduction" .)
traces=$dir/in-flight-all
if ! ls "$traces"/calls-*.parquet >/dev/null 2>&1; then
  echo "generating 10M rows under $dir (both shapes of bench traces; only in-flight-all is used)"
  "$tmp/verdryx" bench traces --dir "$dir" --rows 10000000 --rounds 1 >/dev/null
fi
"$tmp/verdryx" cost-per-correct --traces "$traces" --json |
  jq -c '.groups[0].outcomes[] | {outcome, runs, calls, blocked_calls, total_cost_microusd}' | sort >"$tmp/vx.txt"
for o in step full; do
  "$tmp/duckdb-reduction" --traces "$traces" --threads "$threads" --order "$o" 2>/dev/null | sort >"$tmp/duck-$o.txt"
  if ! cmp -s "$tmp/vx.txt" "$tmp/duck-$o.txt"; then
    echo "reports differ (verdryx vs duckdb --order $o):"; diff "$tmp/vx.txt" "$tmp/duck-$o.txt" || true; exit 1
  fi
done
echo "reports identical: $(wc -l <"$tmp/vx.txt") outcomes, $(jq -s 'map(.calls)|add' "$tmp/vx.txt") calls, $(jq -s 'map(.runs)|add' "$tmp/vx.txt") runs"
echo "load before: $(uptime)"
secs() { local s e; s=$(date +%s%N); "$@" >/dev/null 2>&1; e=$(date +%s%N); echo "scale=3; ($e - $s) / 1000000000" | bc; }
cmds=(vx step full)
declare -A times
for i in $(seq "$rounds"); do
  line="round $i:"
  for j in 0 1 2; do
    c=${cmds[$(( (i + j) % 3 ))]}
    case $c in
      vx) t=$(secs "$tmp/verdryx" cost-per-correct --traces "$traces") ;;
      *) t=$(secs "$tmp/duckdb-reduction" --traces "$traces" --threads "$threads" --order "$c") ;;
    esac
    times[$c]="${times[$c]:-} $t"
    line="$line $c $t s"
  done
  echo "$line"
done
med() { tr ' ' '\n' <<<"$1" | grep . | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
v=$(med "${times[vx]}") s=$(med "${times[step]}") f=$(med "${times[full]}")
echo "medians of $rounds rounds: verdryx $v s; duckdb ($threads threads) $s s ordering runs by step, $f s by (step, read order)"
printf 'ratio verdryx/duckdb: %.3f (step), %.3f (step, read order); goal <= 0.5\n' "$(echo "$v / $s" | bc -l)" "$(echo "$v / $f" | bc -l)"
echo "load after: $(uptime)"
