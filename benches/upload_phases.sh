#!/usr/bin/env bash
# Where a SQLite upload's time goes, phase by phase: each binary serves on a fresh data directory
# and takes the same create CSV (the file of `benches/uploader.sh`), RUNS times, the binaries
# in turn. Prints, for each upload, the request's whole time (`curl`), the whole-file check and
# the rows (from the server's `upload checked` and `upload rows done` log lines), what is left
# of the request (receiving the file, answering with the result file), and the time to fetch
# the same result file again from `/bgrs/<rid>/result`; then the medians of each binary.
#
#   benches/upload_phases.sh                                  # builds; 1,000,000 rows, 5 runs
#   BIN=/path/entiserve COMPARE_BIN=/path/older/entiserve RUNS=7 benches/upload_phases.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
ROWS="${ROWS:-1000000}"
RUNS="${RUNS:-5}"
PORT="${PORT:-18195}"
entiserve_bin
COMPARE_BIN="${COMPARE_BIN:-}"
scratch_dir

campaign_rows "$ROWS" "$work/rows.csv"

# log_ms LINE: the elapsed_ms of the server's log line that says LINE.
log_ms() { grep -o "$1.*elapsed_ms=[0-9]*" "$work/server.log" | grep -o '[0-9]*$' | tail -n 1; }

once() { # binary -> "total check rows rest download" in ms
  rm -rf "$work/data"
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=info "$1" serve --bind "127.0.0.1:$PORT" \
    --data-dir "$work/data" --entities entities >"$work/server.log" 2>&1 &
  pid=$!
  wait_healthz "http://127.0.0.1:$PORT" "$work/server.log" "$1"
  local total check rows rid download
  total=$(curl -sf -u admin:bench -F entity=campaigns -F "csvfile=@$work/rows.csv" \
    -o "$work/result.csv" -w '%{time_total}' "http://127.0.0.1:$PORT/tools/uploader.ex.php")
  check=$(log_ms "upload checked")
  rows=$(log_ms "upload rows done")
  rid=$(grep -o 'upload rows done rid=[0-9a-f]*' "$work/server.log" | tail -n 1 | cut -d= -f2)
  download=$(curl -sf -u admin:bench -o "$work/again.csv" -w '%{time_total}' \
    "http://127.0.0.1:$PORT/bgrs/$rid/result")
  cmp -s "$work/result.csv" "$work/again.csv" || { echo "the result file fetched again differs" >&2; exit 1; }
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
  awk -v t="$total" -v c="$check" -v r="$rows" -v d="$download" \
    'BEGIN { t *= 1000; printf "%d %d %d %d %d\n", t, c, r, t - c - r, d * 1000 }'
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

bins=("$BIN")
[ -n "$COMPARE_BIN" ] && bins+=("$COMPARE_BIN")
echo "rows: $ROWS, runs: $RUNS, machine: $(nproc) cores"
echo
echo "| binary | run | request (ms) | whole-file check | rows | the rest (receive, answer) | result fetched again |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: |"
for run in $(seq 1 "$RUNS"); do
  for b in "${bins[@]}"; do
    read -r t c r rest d < <(once "$b")
    echo "| $b | $run | $t | $c | $r | $rest | $d |"
    echo "$b $t $c $r $rest $d" >> "$work/all"
  done
done
echo
echo "| binary | request (median, ms) | whole-file check | rows | the rest | result fetched again |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for b in "${bins[@]}"; do
  line="| $b |"
  for col in 2 3 4 5 6; do
    line+=" $(awk -v b="$b" -v c="$col" '$1 == b { print $c }' "$work/all" | median) |"
  done
  echo "$line"
done
