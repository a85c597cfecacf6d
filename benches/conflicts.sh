#!/usr/bin/env bash
# Creates whose failing rows fail inside the database: a synchronous batch of ITEMS marker
# creates (`POST /v2.5/markers?bgrs=false`) and a synchronous upload of ROWS marker creates
# (`POST /tools/uploader.ex.php`), every FAIL_EVERY-th (default 100: 1%) repeating the key
# (campaign, name) of a marker that already exists, so that its insert breaks the unique index.
# The baseline, in the same run and alternating with it, is the same request with no repeated
# key. Prints both medians and their ratio: what a few failing rows cost. With COMPARE_BIN, a
# second server (that binary) gets the same requests, turn by turn.
#
#   benches/conflicts.sh                                                      # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/conflicts.sh   # PostgreSQL
#   COMPARE_BIN=/path/to/older/entiserve benches/conflicts.sh                 # A/B
#
# BIN (default ./target/release/entiserve, built unless NO_BUILD=1), ITEMS (10000), ROWS
# (200000; 0 skips the upload), RUNS (5), FAIL_EVERY (100), PORT (18197; a second server
# takes PORT+1).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
ITEMS="${ITEMS:-10000}"
ROWS="${ROWS:-200000}"
RUNS="${RUNS:-5}"
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
  campaign=$(campaign_with_taken "$2") && [ -n "$campaign" ] || exit 1
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

# csv <campaign> <tag> <fail_every>: the upload, in $work/body.csv; 0 repeats no key.
csv() {
  marker_rows "$ROWS" "$1" "$2" "$3" "$work/body.csv"
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

# upload <port> <failing>: uploads the file; prints its wall time in ms, after checking that
# the result file has a line per row and exactly <failing> rows not created.
upload() {
  local out
  out=$(curl -s -o "$work/result.csv" -w '%{http_code} %{time_total}' -u admin:bench \
    -F entity=markers -F "csvfile=@$work/body.csv" "http://127.0.0.1:$1/tools/uploader.ex.php")
  local ok lines
  ok=$(grep -c '^OK;' "$work/result.csv" || true)
  lines=$(($(wc -l < "$work/result.csv") - 1))
  if [ "${out% *}" != 200 ] || [ "$lines" != "$ROWS" ] || [ "$((ROWS - ok))" != "$2" ]; then
    echo "an upload on port $1 ended wrongly: HTTP ${out% *}, $lines result lines, $ok created" >&2
    head -c 500 "$work/result.csv" >&2
    exit 1
  fi
  awk -v s="${out#* }" 'BEGIN { printf "%.1f", s * 1000 }'
}

median() { printf '%s\n' "$@" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

servers=("$BIN")
[ -z "${COMPARE_BIN:-}" ] || servers+=("$COMPARE_BIN")
campaigns=()
for k in "${!servers[@]}"; do
  start "${servers[$k]}" "$((PORT + k))" "s$k"
done
kinds=(batch)
[ "$ROWS" = 0 ] || kinds+=(upload)
declare -A times
for run in $(seq 0 "$RUNS"); do
  for kind in "${kinds[@]}"; do
    for k in "${!servers[@]}"; do
      for f in 0 "$FAIL_EVERY"; do
        if [ "$kind" = batch ]; then
          failing=$((f > 0 ? ITEMS / f : 0))
          body "${campaigns[$k]}" "r$run f$f" "$f"
          ms=$(post "$((PORT + k))" "$failing")
        else
          failing=$((f > 0 ? ROWS / f : 0))
          csv "${campaigns[$k]}" "u$run f$f" "$f"
          ms=$(upload "$((PORT + k))" "$failing")
        fi
        # The first round warms the server up and is not counted.
        [ "$run" = 0 ] || times[$kind,$k,$f]+="$ms "
      done
    done
  done
done
echo "$([ -n "$PG_URL" ] && echo PostgreSQL || echo SQLite), marker creates, 1 in $FAIL_EVERY breaking a key, medians of $RUNS runs:"
for kind in "${kinds[@]}"; do
  if [ "$kind" = batch ]; then
    echo "synchronous batch of $ITEMS items:"
  else
    echo "synchronous upload of $ROWS rows:"
  fi
  for k in "${!servers[@]}"; do
    # shellcheck disable=SC2086
    clean=$(median ${times[$kind,$k,0]})
    # shellcheck disable=SC2086
    failed=$(median ${times[$kind,$k,$FAIL_EVERY]})
    echo "  ${servers[$k]}: none failing $clean ms (${times[$kind,$k,0]% });" \
      "1 in $FAIL_EVERY failing $failed ms (${times[$kind,$k,$FAIL_EVERY]% })"
    awk -v a="$failed" -v b="$clean" 'BEGIN { printf "    ratio: %.2f\n", a / b }'
  done
done
