#!/usr/bin/env bash
# HTTP benchmark of the CRUD routes: GET by id and create, HTTP Basic on every request, wrk with
# 2 threads and 32 connections on the same machine. Prints the median of RUNS runs, a baseline
# measured in the same run, and the ratio to it:
#
# - PostgreSQL (DATABASE_URL=postgres://...): GET against `pgbench -S -c 32 -j 2 -M prepared`
#   (select-only, the same concurrency) on a scratch database the script creates and drops;
#   creates against the target of 15,000 req/s.
# - SQLite (default): GET and create against the server's own `/healthz` (no database, no
#   credentials), the ceiling of the HTTP stack on this machine.
#
#   benches/crud.sh                 # SQLite in a temp dir
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench benches/crud.sh
#   BIN=/path/to/other/entiserve benches/crud.sh   # another binary (an A/B), nothing built
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
RUNS="${RUNS:-5}"
DURATION="${DURATION:-10s}"
PORT="${PORT:-18181}"
CREATE_TARGET="${CREATE_TARGET:-15000}"
DATABASE_URL="${DATABASE_URL:-}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
entiserve_bin
case "$DATABASE_URL" in
  postgres:* | postgresql:*) pg=1 ;;
  "") pg=0 ;;
  *) echo "DATABASE_URL must be postgres:// (or unset, for SQLite)" >&2; exit 1 ;;
esac
if [ "$pg" = 1 ]; then
  for c in pgbench psql; do
    command -v "$c" >/dev/null || { echo "install $c (postgresql-client)" >&2; exit 1; }
  done
fi
dir=$(mktemp -d)
pid=
scratch=
cleanup() {
  [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  if [ -n "$scratch" ]; then
    psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS \"$scratch\"" >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve \
  --bind "127.0.0.1:$PORT" --data-dir "$dir/data" --entities entities 2>"$dir/server.log" &
pid=$!
wait_healthz "http://127.0.0.1:$PORT" "$dir/server.log" "is DATABASE_URL's database there?"
base="http://127.0.0.1:$PORT"
auth="admin:bench"
for i in $(seq 1 100); do
  curl -sf -u "$auth" -X POST "$base/campaigns" -H 'content-type: application/json' \
    -d "{\"name\":\"seed $i\"}" >/dev/null
done
# The ids of the seed rows (a database used before holds older rows too).
first=$(curl -sf -u "$auth" "$base/campaigns?sort=-id&limit=100&fields=id" |
  tr -c '0-9\n' ' ' | awk '{for (i = 1; i <= NF; i++) print $i}' | sort -n | head -1)
cat > "$dir/get.lua" <<LUA
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/campaigns/" .. (n % 100 + $first))
end
LUA
cat > "$dir/create.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"bench","type":2,"description":"created by wrk","is_active":true}'
LUA
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
# run NAME SCRIPT PATH: wrk RUNS times; prints the runs, sets $med to their median.
run() {
  local out=() res rps non2xx
  for _ in $(seq 1 "$RUNS"); do
    if [ -n "$2" ]; then
      res=$(wrk -t2 -c32 -d"$DURATION" -s "$dir/$2" "$base$3" 2>&1)
    else
      res=$(wrk -t2 -c32 -d"$DURATION" "$base$3" 2>&1)
    fi
    rps=$(echo "$res" | awk '/Requests\/sec/ {print int($2)}')
    non2xx=$(echo "$res" | awk '/Non-2xx/ {print $NF}')
    if [ -n "$non2xx" ]; then echo "$1: $non2xx non-2xx responses" >&2; exit 1; fi
    out+=("$rps")
  done
  med=$(printf '%s\n' "${out[@]}" | median)
  printf '%s req/s: runs %s, median %s\n' "$1" "${out[*]}" "$med"
}
# pgbench -S with wrk's concurrency, RUNS times, on a scratch database; sets $med.
pgbench_select() {
  scratch="entiserve_crud_pgbench_$$"
  psql -q "$DATABASE_URL" -c "CREATE DATABASE \"$scratch\"" >/dev/null
  local url out=() tps secs
  url=$(echo "$DATABASE_URL" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$scratch#")
  pgbench -q -i "$url" >/dev/null 2>&1
  secs=${DURATION%s}
  for _ in $(seq 1 "$RUNS"); do
    tps=$(pgbench -S -c 32 -j 2 -M prepared -T "$secs" "$url" 2>/dev/null |
      awk '/^tps/ {print int($3)}')
    out+=("$tps")
  done
  psql -q "$DATABASE_URL" -c "DROP DATABASE \"$scratch\"" >/dev/null
  scratch=
  med=$(printf '%s\n' "${out[@]}" | median)
  printf 'pgbench -S -c 32 -j 2 -M prepared tps: runs %s, median %s\n' "${out[*]}" "$med"
}
if [ "$pg" = 1 ]; then
  pgbench_select; baseline=$med; bname="pgbench -S"
else
  run "GET /healthz (baseline)" "" /healthz; baseline=$med; bname="/healthz"
fi
run "GET /campaigns/<id>" get.lua /; get=$med
run "POST /campaigns" create.lua /campaigns; create=$med
echo
printf 'GET by id:  %s req/s, baseline %s %s, ratio %s\n' "$get" "$bname" "$baseline" \
  "$(ratio "$get" "$baseline")"
if [ "$pg" = 1 ]; then
  printf 'create:     %s req/s, target %s req/s, ratio %s\n' "$create" "$CREATE_TARGET" \
    "$(ratio "$create" "$CREATE_TARGET")"
else
  printf 'create:     %s req/s, baseline %s %s, ratio %s\n' "$create" "$bname" "$baseline" \
    "$(ratio "$create" "$baseline")"
fi
