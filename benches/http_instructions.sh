#!/usr/bin/env bash
# Instructions a request costs the server in user space, counted by valgrind's callgrind: close
# to the same count for the same binary whatever else the machine is doing, so a change to the
# HTTP path can be judged on a busy machine where the rates of `benches/http_path.sh` move by 10%
# from run to run. (The kernel's share, about half of a request's time, is not counted.)
#
# Each server runs under callgrind with instrumentation off; wrk (1 thread, 4 connections) warms
# it, then instrumentation is switched on for DURATION of wrk and off after it, and the count is
# divided by the requests wrk completed. Measured: the minimal poem server with entiserve's
# fixed API (`examples/min_poem.rs --layer api`), entiserve's `/healthz` (the same plus the
# front layer), and GET by id with HTTP Basic (SQLite, one object). With COMPARE_BIN, the same
# for another entiserve build, and the ratios.
#
# The C library's `memcpy` and `memmove` are counted in their own column too: they copy large
# blocks with `rep movsb`, which callgrind counts once per byte copied (a 32 KB copy counts
# 32,767 instructions but takes a few hundred cycles), so a change that moves large futures
# differently shows there first. Judge those copies by `perf`'s share of `memmove` instead.
#
#   benches/http_instructions.sh                             # builds both binaries
#   DURATION=5s BIN=/path/entiserve MIN_BIN=/path/min_poem COMPARE_BIN=/path/older/entiserve \
#     benches/http_instructions.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
DURATION="${DURATION:-5s}"
PORT="${PORT:-18195}"
command -v valgrind >/dev/null || { echo "install valgrind (apt-get install valgrind)" >&2; exit 1; }
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
MIN_BIN="${MIN_BIN:-}"
COMPARE_BIN="${COMPARE_BIN:-}"
target="${CARGO_TARGET_DIR:-target}/release"
entiserve_bin
if [ -z "$MIN_BIN" ]; then
  cargo build --release --quiet --example min_poem
  MIN_BIN="$target/examples/min_poem"
fi
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
auth="Authorization: Basic YWRtaW46YmVuY2g="

# start OUT COMMAND...: the command under callgrind, instrumentation off; sets $pid.
start() {
  local out="$1"
  shift
  valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file="$out" "$@" \
    2>"$work/server.log" &
  pid=$!
  for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return; sleep 0.2; done
  echo "the server did not start; its log:" >&2
  cat "$work/server.log" >&2
  exit 1
}

# measure OUT PATH [CREDS]: instructions a request of wrk on PATH costs the running server,
# then those of them in the C library's memcpy and memmove.
measure() {
  local out="$1" url="http://127.0.0.1:$PORT$2" hdr=() res n total copied file
  [ "${3:-}" = 1 ] && hdr=(-H "$auth")
  wrk -t1 -c4 -d1s "${hdr[@]}" "$url" >/dev/null
  callgrind_control -z "$pid" >/dev/null 2>&1
  callgrind_control -i on "$pid" >/dev/null 2>&1
  res=$(wrk -t1 -c4 -d"$DURATION" "${hdr[@]}" "$url")
  callgrind_control -i off "$pid" >/dev/null 2>&1
  if echo "$res" | grep -q Non-2xx; then echo "$url: non-2xx answers" >&2; exit 1; fi
  n=$(echo "$res" | awk '/requests in/ {print $1}')
  rm -f "$out"*
  callgrind_control -d "$pid" >/dev/null 2>&1
  sleep 1
  file=$(ls -t "$out"* | head -n 1)
  total=$(callgrind_annotate "$file" 2>/dev/null |
    awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
  copied=$(callgrind_annotate --threshold=100 "$file" 2>/dev/null |
    awk '/:__mem(cpy|move)_/ { gsub(",", "", $1); sum += $1 } END { print sum + 0 }')
  echo "$((total / n)) $((copied / n))"
}

stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

# entiserve BINARY NAME: its /healthz and GET by id, in $r_healthz and $r_get (each
# "instructions copied", as measure prints them).
entiserve() {
  rm -rf "$work/data"
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn start "$work/$2.out" "$1" serve \
    --bind "127.0.0.1:$PORT" --data-dir "$work/data" --entities entities
  local id
  id=$(curl -sf -u admin:bench -X POST "http://127.0.0.1:$PORT/campaigns" \
    -H 'content-type: application/json' -d '{"name":"http path"}' |
    sed -E 's/.*"id": *([0-9]+).*/\1/')
  r_healthz=$(measure "$work/$2.out" /healthz)
  r_get=$(measure "$work/$2.out" "/campaigns/$id" 1)
  stop
}

start "$work/min.out" "$MIN_BIN" --bind "127.0.0.1:$PORT" --layer api
api=$(measure "$work/min.out" /healthz)
stop
entiserve "$BIN" bin
read -r api api_copied <<<"$api"
read -r healthz healthz_copied <<<"$r_healthz"
read -r get get_copied <<<"$r_get"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
echo "| server | route | instructions a request | of which memcpy/memmove | ratio |"
echo "| --- | --- | ---: | ---: | --- |"
echo "| min_poem --layer api | GET /healthz | $api | $api_copied | 1.000 |"
echo "| entiserve (BIN) | GET /healthz | $healthz | $healthz_copied | $(ratio "$healthz" "$api") of min_poem --layer api |"
echo "| entiserve (BIN) | GET /campaigns/<id>, Basic | $get | $get_copied | $(ratio "$get" "$healthz") of its /healthz |"
if [ -n "$COMPARE_BIN" ]; then
  entiserve "$COMPARE_BIN" compare
  read -r c_healthz c_healthz_copied <<<"$r_healthz"
  read -r c_get c_get_copied <<<"$r_get"
  echo "| entiserve (COMPARE_BIN) | GET /healthz | $c_healthz | $c_healthz_copied | BIN / COMPARE_BIN: $(ratio "$healthz" "$c_healthz") |"
  echo "| entiserve (COMPARE_BIN) | GET /campaigns/<id>, Basic | $c_get | $c_get_copied | BIN / COMPARE_BIN: $(ratio "$get" "$c_get") |"
fi
