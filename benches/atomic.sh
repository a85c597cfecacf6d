#!/usr/bin/env bash
# How long an all-or-nothing upload (`atomic=1`) holds the SQLite writer: ROWS_LIST create CSVs
# (the uploader benchmark's rows) uploaded synchronously with atomic=1 into a fresh server.
# The writer is held from the transaction's BEGIN to its COMMIT, which the server logs as
# `whole upload committed ... held_ms=<n>`. While it is held, single writes wait: a single
# create is sent every 50 ms while the upload runs, and the longest one is printed. A plain
# upload of the same file is timed in the same run, with the same creates beside it.
#
#   benches/atomic.sh                      # 100,000 and 1,000,000 rows
#   ROWS_LIST="1000000" benches/atomic.sh
#   BIN=/path/to/entiserve benches/atomic.sh   # that binary, nothing built
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS_LIST="${ROWS_LIST:-100000 1000000}"
PORT="${PORT:-18192}"
if [ -z "${BIN:-}" ]; then
  [ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin entiserve
  BIN="${CARGO_TARGET_DIR:-./target}/release/entiserve"
fi
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

gen() { # rows file
  awk -v n="$1" 'BEGIN {
    print "op,name,type,description,is_active";
    for (i = 1; i <= n; i++) printf "c,campaign %d,%d,row number %d of the benchmark,1\n", i, i % 7, i
  }' > "$2"
}
now_ms() { date +%s%3N; }

start_server() {
  rm -rf "$work/data"
  NO_COLOR=1 ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=info "$BIN" serve --bind "127.0.0.1:$PORT" \
    --data-dir "$work/data" --entities entities 2>"$work/server.log" &
  pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return; sleep 0.05; done
  echo "server did not start" >&2; cat "$work/server.log" >&2; exit 1
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

upload() { # file atomic(0|1) -> "total_ms longest_create_ms"
  start_server
  local t0 t1
  t0=$(now_ms)
  curl -sf -u admin:bench -F entity=campaigns -F "atomic=$2" -F "csvfile=@$1" \
    "http://127.0.0.1:$PORT/tools/uploader.ex.php" -o "$work/result.csv" &
  local up=$! longest=0 c0 c1
  while kill -0 "$up" 2>/dev/null; do
    c0=$(now_ms)
    curl -sf -u admin:bench -H 'content-type: application/json' -d '{"name":"beside"}' \
      "http://127.0.0.1:$PORT/campaigns" -o /dev/null
    c1=$(now_ms)
    [ $((c1 - c0)) -gt "$longest" ] && longest=$((c1 - c0))
    sleep 0.05
  done
  wait "$up"
  t1=$(now_ms)
  stop_server
  echo "$((t1 - t0)) $longest"
}

echo "machine: $(nproc) cores; SQLite; release build"
echo
echo "| rows | atomic upload | writer held (BEGIN to COMMIT) | longest single create beside it | plain upload | longest single create beside it |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
for rows in $ROWS_LIST; do
  gen "$rows" "$work/f.csv"
  read -r at ac < <(upload "$work/f.csv" 1)
  held=$(sed 's/\x1b\[[0-9;]*m//g' "$work/server.log" | grep -o 'held_ms=[0-9]*' | tail -n 1 | cut -d= -f2)
  [ -n "$held" ] || { echo "no held_ms in the server log" >&2; tail -n 5 "$work/server.log" >&2; exit 1; }
  ok=$(grep -c '^OK,' "$work/result.csv" || true)
  ok=$((ok))
  [ "$ok" = "$rows" ] || { echo "atomic upload of $rows rows: $ok OK" >&2; exit 1; }
  read -r pt pc < <(upload "$work/f.csv" 0)
  printf '| %s | %.2f s | %.2f s | %.2f s | %.2f s | %.3f s |\n' "$rows" \
    "$(echo "$at / 1000" | bc -l)" "$(echo "$held / 1000" | bc -l)" "$(echo "$ac / 1000" | bc -l)" \
    "$(echo "$pt / 1000" | bc -l)" "$(echo "$pc / 1000" | bc -l)"
done
