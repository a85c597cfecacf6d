#!/usr/bin/env bash
# Paired synchronous batch benchmark: two servers run at once, BIN and COMPARE_BIN, each on a
# database of its own, and the same synchronous batch of 10,000 creates (`POST
# /v2.5/campaigns?bgrs=false`) is sent to one and then the other, turn by turn. Each pair of
# requests meets the machine in the same state, so on a shared, uneven machine the ratio of the
# two medians is steadier than two runs of benches/batch.sh apart. Prints both medians, every
# time, and the ratio.
#
#   COMPARE_BIN=/path/to/older/entiserve benches/batch_pair.sh                 # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres COMPARE_BIN=... benches/batch_pair.sh
#
# BIN (default ./target/release/entiserve, built unless NO_BUILD=1), ITEMS (10000),
# PAIRS (15), PORT (18195; the other server takes PORT+1).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${COMPARE_BIN:?set COMPARE_BIN to the binary to compare with}"
ITEMS="${ITEMS:-10000}"
PAIRS="${PAIRS:-15}"
PORT="${PORT:-18195}"
PG_URL="${PG_URL:-}"
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin entiserve
BIN="${BIN:-./target/release/entiserve}"
work=$(mktemp -d)
pids=()
dbs=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for db in "${dbs[@]}"; do psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" || true; done
  rm -rf "$work"
}
trap cleanup EXIT
# About 60 bytes an item.
awk -v n="$ITEMS" 'BEGIN {
  printf "[";
  for (i = 0; i < n; i++) printf "%s{\"name\":\"pair %d\",\"type\":2,\"description\":\"x\"}", (i ? "," : ""), i;
  printf "]";
}' > "$work/body.json"

# start <binary> <port> <name>: a server on a fresh data directory (and database).
start() {
  local url=()
  if [ -n "$PG_URL" ]; then
    local db="entiserve_pair_$3_$$"
    psql -q "$PG_URL" -c "CREATE DATABASE \"$db\""
    dbs+=("$db")
    url=(--database-url "${PG_URL%/*}/$db")
  fi
  mkdir "$work/$3"
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$1" serve --bind "127.0.0.1:$2" \
    --data-dir "$work/$3" --entities entities "${url[@]}" > "$work/$3.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$2/healthz" && return
    sleep 0.1
  done
  echo "the server $1 did not start; its log:" >&2
  cat "$work/$3.log" >&2
  exit 1
}

# post <port>: one synchronous batch; prints its wall time in ms.
post() {
  local out
  out=$(curl -s -o "$work/reply.json" -w '%{http_code} %{time_total}' -u admin:bench \
    -H 'Content-Type: application/json' --data-binary "@$work/body.json" \
    "http://127.0.0.1:$1/v2.5/campaigns?bgrs=false")
  if [ "${out% *}" != 200 ] || [ "$(grep -o '"status":200' "$work/reply.json" | wc -l)" != "$ITEMS" ]; then
    echo "a batch on port $1 did not create every item (HTTP ${out% *})" >&2
    exit 1
  fi
  awk -v s="${out#* }" 'BEGIN { printf "%.1f", s * 1000 }'
}

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

start "$BIN" "$PORT" this
start "$COMPARE_BIN" "$((PORT + 1))" that
post "$PORT" > /dev/null
post "$((PORT + 1))" > /dev/null
this=()
that=()
for i in $(seq "$PAIRS"); do
  # Who goes first alternates, so neither always meets the other's leftovers.
  if [ $((i % 2)) = 1 ]; then
    this+=("$(post "$PORT")")
    that+=("$(post "$((PORT + 1))")")
  else
    that+=("$(post "$((PORT + 1))")")
    this+=("$(post "$PORT")")
  fi
done
backend=SQLite
[ -n "$PG_URL" ] && backend=PostgreSQL
a=$(median "${this[@]}")
b=$(median "${that[@]}")
echo "$backend, synchronous batch of $ITEMS creates, $PAIRS pairs of requests:"
echo "  $BIN: median $a ms (${this[*]})"
echo "  $COMPARE_BIN: median $b ms (${that[*]})"
awk -v a="$a" -v b="$b" 'BEGIN { printf "  this / that: %.2f\n", a / b }'
