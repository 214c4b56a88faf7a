#!/usr/bin/env bash
# Exact cosine top-2 over 100,000 x 1536 unit float32 rows, one query at a
# time: `verdryx bench index` against NumPy (+ OpenBLAS) in the same run,
# the two alternating, ROUNDS rounds (default 5; each round is a fresh
# process of each, median of REPS queries). Prints every round, the medians
# and the ratio verdryx/NumPy.
#
#   apt-get install -y python3-numpy libopenblas0-pthread   # Debian
#   bench-tools/index.sh [ROUNDS]
#
# NumPy runs under Debian's /usr/bin/python3 (a pyenv python3 on PATH has
# no python3-numpy). N, DIM and REPS override the sizes.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
n=${N:-100000}
dim=${DIM:-1536}
reps=${REPS:-15}
py=/usr/bin/python3
bin=$(mktemp -d)/verdryx
CGO_ENABLED=0 go build -trimpath -o "$bin" ./cmd/verdryx
echo "load before: $(uptime)"
vx=() np=()
for i in $(seq "$rounds"); do
  run_vx() { "$bin" bench index --n "$n" --dim "$dim" --reps "$reps" --json | "$py" -c 'import json,sys; r=json.load(sys.stdin); w=r["rows"][0]; print(r["kernel_f32"], r["kernel_i8"], w["single_ns"]/1e6, w["floor_ns"]/1e6, w["floor_i8_ns"]/1e6, w["reranked"])'; }
  run_np() { "$py" bench-tools/numpy_index.py --n "$n" --dim "$dim" --reps "$reps" | "$py" -c 'import json,sys; print(json.load(sys.stdin)["single_ms"])'; }
  if (( i % 2 )); then a=$(run_np); b=$(run_vx); else b=$(run_vx); a=$(run_np); fi
  read -r kf ki vs fl f8 rr <<<"$b"
  np+=("$a") vx+=("$vs")
  printf 'round %d: numpy %.2f ms  verdryx %.2f ms (f32 floor %.2f, int8 floor %.2f, reranked %.1f rows; kernels f32 %s, int8 %s)  ratio %.3f\n' \
    "$i" "$a" "$vs" "$fl" "$f8" "$rr" "$kf" "$ki" "$(echo "$vs / $a" | bc -l)"
done
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
mn=$(med "${np[@]}") mv=$(med "${vx[@]}")
printf 'median of %d rounds: numpy %.2f ms, verdryx %.2f ms, ratio %.3f (goal <= 0.5)\n' "$rounds" "$mn" "$mv" "$(echo "$mv / $mn" | bc -l)"
echo "load after: $(uptime)"
rm -rf "$(dirname "$bin")"
