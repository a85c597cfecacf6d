#!/usr/bin/env bash
# Synchronous batches whose failing items fail inside the database: 10,000 marker creates
# (`POST /v2.5/markers?bgrs=false`), every FAIL_EVERY-th (default 100: 1%) repeating the key
# (campaign, name) of a marker that already exists, so that its insert breaks the unique index.
# The baseline, in the same run and alternating with it, is the same batch with no repeated
# key. Prints both medians and their ratio: what a few failing items cost a batch. With
# COMPARE_BIN, a second server (that binary) gets the same requests, turn by turn.
#
#   benches/batch_conflicts.sh                                                  # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/batch_conflicts.sh   # PostgreSQL
#   COMPARE_BIN=/path/to/older/entiserve benches/batch_conflicts.sh             # A/B
#
# BIN (default ./target/release/entiserve, built unless NO_BUILD=1), ITEMS (10000), RUNS (7),
# FAIL_EVERY (100), PORT (18197; a second server takes PORT+1).
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS="${ITEMS:-10000}"
RUNS="${RUNS:-7}"
FAIL_EVERY="${FAIL_EVERY:-100}"
PORT="${PORT:-18197}"
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

# start <binary> <port> <name>: a server on a fresh data directory (and database), with one
# campaign and its marker "taken"; the campaign's id is added to `campaigns`.
start() {
  local url=()
  if [ -n "$PG_URL" ]; then
    local db="entiserve_conflicts_$3_$$"
    psql -q "$PG_URL" -c "CREATE DATABASE \"$db\""
    dbs+=("$db")
    url=(--database-url "${PG_URL%/*}/$db")
  fi
  mkdir "$work/$3"
  # A server already on the port would answer in its place.
  if curl -s -o /dev/null "http://127.0.0.1:$2/healthz"; then
    echo "port $2 is taken" >&2
    exit 1
  fi
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$1" serve --bind "127.0.0.1:$2" \
    --data-dir "$work/$3" --entities entities "${url[@]}" > "$work/$3.log" 2>&1 &
  pids+=($!)
  local up=
  for _ in $(seq 100); do
    curl -sf -o /dev/null "http://127.0.0.1:$2/healthz" && { up=1; break; }
    sleep 0.1
  done
  if [ -z "$up" ]; then
    echo "the server $1 did not start; its log:" >&2
    cat "$work/$3.log" >&2
    exit 1
  fi
  local campaign
  campaign=$(curl -sf -u admin:bench -H 'Content-Type: application/json' -d '{"name":"c"}' \
    "http://127.0.0.1:$2/v2.5/campaigns" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
  [ -n "$campaign" ] || { echo "no campaign was created on port $2" >&2; exit 1; }
  curl -sf -o /dev/null -u admin:bench -H 'Content-Type: application/json' \
    -d "{\"name\":\"taken\",\"campaign_id\":$campaign}" "http://127.0.0.1:$2/v2.5/markers"
  campaigns+=("$campaign")
}

# body <campaign> <tag> <fail_every>: the batch, in $work/body.json; 0 repeats no key.
body() {
  awk -v n="$ITEMS" -v c="$1" -v t="$2" -v f="$3" 'BEGIN {
    printf "[";
    for (i = 0; i < n; i++) {
      name = (f > 0 && i % f == f - 1) ? "taken" : ("m " t " " i);
      printf "%s{\"name\":\"%s\",\"campaign_id\":%d,\"page\":%d}", (i ? "," : ""), name, c, i;
    }
    printf "]";
  }' > "$work/body.json"
}

# post <port> <failing>: sends the batch; prints its wall time in ms, after checking that
# exactly <failing> items failed, with 409.
post() {
  local out
  out=$(curl -s -o "$work/reply.json" -w '%{http_code} %{time_total}' -u admin:bench \
    -H 'Content-Type: application/json' --data-binary "@$work/body.json" \
    "http://127.0.0.1:$1/v2.5/markers?bgrs=false")
  local ok conflicts
  ok=$(grep -o '"status":200' "$work/reply.json" | wc -l)
  conflicts=$(grep -o '"status":409' "$work/reply.json" | wc -l)
  if [ "${out% *}" != 200 ] || [ "$conflicts" != "$2" ] || [ "$((ok + conflicts))" != "$ITEMS" ]; then
    echo "a batch on port $1 ended wrongly: HTTP ${out% *}, $ok created, $conflicts conflicts" >&2
    exit 1
  fi
  awk -v s="${out#* }" 'BEGIN { printf "%.1f", s * 1000 }'
}

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

failing=$((FAIL_EVERY > 0 ? ITEMS / FAIL_EVERY : 0))
servers=("$BIN")
[ -z "${COMPARE_BIN:-}" ] || servers+=("$COMPARE_BIN")
campaigns=()
for k in "${!servers[@]}"; do
  start "${servers[$k]}" "$((PORT + k))" "s$k"
done
declare -A times
for run in $(seq 0 "$RUNS"); do
  for k in "${!servers[@]}"; do
    for f in 0 "$FAIL_EVERY"; do
      body "${campaigns[$k]}" "r$run f$f" "$f"
      ms=$(post "$((PORT + k))" "$([ "$f" = 0 ] && echo 0 || echo "$failing")")
      # The first round warms the server up and is not counted.
      [ "$run" = 0 ] || times[$k,$f]+="$ms "
    done
  done
done
echo "$([ -n "$PG_URL" ] && echo PostgreSQL || echo SQLite), synchronous batch of $ITEMS marker creates, $RUNS runs:"
for k in "${!servers[@]}"; do
  # shellcheck disable=SC2086
  clean=$(median ${times[$k,0]})
  # shellcheck disable=SC2086
  failed=$(median ${times[$k,$FAIL_EVERY]})
  echo "  ${servers[$k]}:"
  echo "    no failing item: median $clean ms (${times[$k,0]% })"
  echo "    $failing items failing in the database: median $failed ms (${times[$k,$FAIL_EVERY]% })"
  awk -v a="$failed" -v b="$clean" 'BEGIN { printf "    ratio: %.2f\n", a / b }'
done
