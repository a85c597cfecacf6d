#!/usr/bin/env bash
# SQLite point reads beside writes: what keeping a read snapshot between point reads does when
# the server also writes. Two loads, each on a fresh data directory, turn by turn for BIN and
# COMPARE_BIN in each run:
#
# - creates alone (wrk 2x32, HTTP Basic): creates a second, and the size of the write-ahead log
#   (`entiserve.db-wal`) when the load ends (a snapshot held too long keeps the log from being
#   copied back and reset, and it grows);
# - GET by id (wrk 1x24) and creates (wrk 1x8) at once: both rates, and the log's size.
#
# Prints every run and the medians.
#
#   BIN=/path/entiserve COMPARE_BIN=/path/older/entiserve benches/reads_under_writes.sh
#   RUNS=5 DURATION=8s benches/reads_under_writes.sh      # builds the release binary
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
RUNS="${RUNS:-3}"
DURATION="${DURATION:-5s}"
PORT="${PORT:-18197}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
entiserve_bin
COMPARE_BIN="${COMPARE_BIN:-}"
scratch_dir
base="http://127.0.0.1:$PORT"
auth="Authorization: Basic YWRtaW46YmVuY2g="
cat > "$work/create.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"bench","type":2,"description":"created by wrk","is_active":true}'
LUA

start() { # binary
  rm -rf "$work/data"
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$1" serve --bind "127.0.0.1:$PORT" \
    --data-dir "$work/data" --entities entities 2>"$work/server.log" &
  pid=$!
  wait_healthz "$base" "$work/server.log"
  curl -sf -u admin:bench -X POST "$base/campaigns" -H 'content-type: application/json' \
    -d '{"name":"read while written"}' >/dev/null
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }
rate() { awk '/Requests\/sec/ {printf "%d", $2}' "$1"; }
wal_mb() { awk -v b="$(stat -c %s "$work/data/entiserve.db-wal" 2>/dev/null || echo 0)" \
  'BEGIN {printf "%.0f", b / 1e6}'; }
failed() { grep -q "Non-2xx" "$@" && { echo "non-2xx answers:" >&2; cat "$@" >&2; exit 1; }; return 0; }

# one binary run -> appends "creates wal_mb | get creates wal_mb" to $work/<name>.runs
one() { # name binary
  local alone mixed
  start "$2"
  wrk -t2 -c32 -d"$DURATION" -s "$work/create.lua" "$base/campaigns" >"$work/c.txt"
  failed "$work/c.txt"
  alone="$(rate "$work/c.txt") $(wal_mb)"
  stop
  start "$2"
  wrk -t1 -c8 -d"$DURATION" -s "$work/create.lua" "$base/campaigns" >"$work/c.txt" &
  local writer=$!
  wrk -t1 -c24 -d"$DURATION" -H "$auth" "$base/campaigns/1" >"$work/g.txt"
  wait "$writer"
  failed "$work/c.txt" "$work/g.txt"
  mixed="$(rate "$work/g.txt") $(rate "$work/c.txt") $(wal_mb)"
  stop
  echo "$alone $mixed" >>"$work/$1.runs"
}

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
col() { awk -v c="$2" '{print $c}' "$work/$1.runs" | median; }
list() { awk -v c="$2" '{printf "%s%s", (NR > 1 ? ", " : ""), $c}' "$work/$1.runs"; }

for _ in $(seq 1 "$RUNS"); do
  one bin "$BIN"
  [ -z "$COMPARE_BIN" ] || one compare "$COMPARE_BIN"
done

echo "| server | creates alone, /s | log after, MB | GET beside creates, /s | creates beside GET, /s | log after, MB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
row() { # name label
  echo "| $2 | $(col "$1" 1) ($(list "$1" 1)) | $(col "$1" 2) | $(col "$1" 3) ($(list "$1" 3)) | $(col "$1" 4) ($(list "$1" 4)) | $(col "$1" 5) |"
}
row bin "entiserve (BIN)"
[ -z "$COMPARE_BIN" ] || row compare "entiserve (COMPARE_BIN)"
