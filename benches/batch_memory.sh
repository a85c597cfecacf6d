#!/usr/bin/env bash
# Batch memory benchmark: a background batch of 100,000 creates (`POST /campaigns`, a JSON array
# of about 8 MB) sent to a freshly started server. Per run it prints the server's peak resident
# size (VmHWM, read once the request is finished) and the time from sending the POST until
# `GET /bgrs/<rid>` reports it finished; then the medians. Every run starts a new server on a
# new data directory, so each peak is that one batch's. Then the target (64 MB) and, as the
# baseline, the resident size of the same server at rest.
#
#   benches/batch_memory.sh                                   # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/batch_memory.sh   # and PostgreSQL
#   COMPARE_BIN=/path/to/older/entiserve benches/batch_memory.sh   # A/B: the other binary, same runs
#
# ITEMS (100000), RUNS (5), PORT (18193); NO_BUILD=1 skips `cargo build --release`.
set -euo pipefail
cd "$(dirname "$0")/.."
ITEMS="${ITEMS:-100000}"
RUNS="${RUNS:-5}"
PORT="${PORT:-18193}"
PG_URL="${PG_URL:-${DATABASE_URL:-}}"
[ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin entiserve
BIN="${BIN:-./target/release/entiserve}"
COMPARE_BIN="${COMPARE_BIN:-}"
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

# About 80 bytes an item: 100,000 items make an 8 MB body.
awk -v n="$ITEMS" 'BEGIN {
  printf "[";
  for (i = 1; i <= n; i++) {
    if (i > 1) printf ",";
    printf "{\"name\":\"campaign %d\",\"type\":%d,\"description\":\"row number %d of the batch\"}", i, i % 7, i
  }
  print "]"
}' > "$work/batch.json"

now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

start_server() { # data_dir database_url binary
  local args=(serve --bind "127.0.0.1:$PORT" --data-dir "$1" --entities entities)
  [ -n "$2" ] && args+=(--database-url "$2")
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$3" "${args[@]}" 2>"$work/server.log" &
  pid=$!
  for _ in $(seq 1 400); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return; sleep 0.05; done
  echo "server did not start" >&2; cat "$work/server.log" >&2; exit 1
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

pg_db() { # -> url of a fresh database
  local name="entiserve_bench_$RANDOM$RANDOM"
  psql "$PG_URL" -qAtc "CREATE DATABASE $name" >/dev/null
  echo "${PG_URL%/*}/$name"
}
pg_drop() { psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS ${1##*/} WITH (FORCE)" >/dev/null; }

batch_once() { # database_url binary -> "ms rss_kb items_ok"
  rm -rf "$work/data"
  start_server "$work/data" "$1" "$2"
  local t0 t1 rid status rss ok
  t0=$(now_ms)
  rid=$(curl -sf -u admin:bench -H 'content-type: application/json' \
    --data-binary "@$work/batch.json" "http://127.0.0.1:$PORT/campaigns" | jq -r .request)
  while :; do
    status=$(curl -sf -u admin:bench "http://127.0.0.1:$PORT/bgrs/$rid" | jq -r '.[0].status_id')
    [ "$status" = 4 ] && break
    [ "$status" = 2 ] || { echo "request $rid ended with status_id $status" >&2; exit 1; }
    sleep 0.005
  done
  t1=$(now_ms)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  ok=$(curl -sf -u admin:bench "http://127.0.0.1:$PORT/bgrs/$rid/result" | jq '[.[] | select(.status == 200)] | length')
  stop_server
  echo "$((t1 - t0)) $rss $ok"
}

row() { # label database ("" or pg)
  local rss=() times=() orss=() otimes=() ok="" ook="" db ms kb
  for r in $(seq 1 "$RUNS"); do
    for which in this other; do
      local bin="$BIN"
      if [ "$which" = other ]; then [ -n "$COMPARE_BIN" ] || continue; bin="$COMPARE_BIN"; fi
      db=""; [ "$2" = pg ] && db=$(pg_db)
      if [ "$which" = this ]; then
        read -r ms kb ok < <(batch_once "$db" "$bin"); times+=("$ms"); rss+=("$kb")
      else
        read -r ms kb ook < <(batch_once "$db" "$bin"); otimes+=("$ms"); orss+=("$kb")
      fi
      [ -n "$db" ] && pg_drop "$db"
      echo "  $1 run $r, $bin: $ms ms, peak $((kb / 1024)) MB" >&2
    done
  done
  local t m
  t=$(printf '%s\n' "${times[@]}" | median)
  m=$(printf '%s\n' "${rss[@]}" | median)
  printf '| %s | %d MB (%s) | %d ms | %s |' "$1" "$((m / 1024))" \
    "$(printf '%s\n' "${rss[@]}" | awk '{printf "%s%d", (NR > 1 ? ", " : ""), $1 / 1024}')" "$t" "$ok"
  if [ -n "$COMPARE_BIN" ]; then
    local ot om
    ot=$(printf '%s\n' "${otimes[@]}" | median)
    om=$(printf '%s\n' "${orss[@]}" | median)
    printf ' %d MB (%s) | %d ms | %s |' "$((om / 1024))" \
      "$(printf '%s\n' "${orss[@]}" | awk '{printf "%s%d", (NR > 1 ? ", " : ""), $1 / 1024}')" "$ot" "$ook"
  fi
  echo
}

echo "runs: $RUNS, items: $ITEMS, body: $(($(stat -c %s "$work/batch.json") / 1024)) KB, machine: $(nproc) cores"
echo
if [ -n "$COMPARE_BIN" ]; then
  echo "| backend | peak RSS, median (runs) | POST to finished, median | items OK | $COMPARE_BIN: peak RSS | time | items OK |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
else
  echo "| backend | peak RSS, median (runs) | POST to finished, median | items OK |"
  echo "| --- | --- | --- | --- |"
fi
row "SQLite" ""
[ -n "$PG_URL" ] && row "PostgreSQL" pg
# The baseline: the same server at rest, one second after it started (no request yet).
rm -rf "$work/data"
start_server "$work/data" "" "$BIN"
sleep 1
idle=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
stop_server
echo
echo "target: a peak of 64 MB or less; the server at rest (SQLite): $((idle / 1024)) MB"
exit 0
