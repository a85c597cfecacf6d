#!/usr/bin/env bash
# HTTP benchmark of the CRUD routes: GET by id and create, HTTP Basic on every request, SQLite,
# wrk with 2 threads and 32 connections on the same machine. Prints the median of RUNS runs.
#
#   benches/crud.sh                 # SQLite in a temp dir
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench benches/crud.sh
#   BIN=/path/to/other/entiserve benches/crud.sh   # another binary (an A/B), nothing built
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
DURATION="${DURATION:-10s}"
PORT="${PORT:-18181}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
BIN="${BIN:-}"
[ -n "$BIN" ] || { cargo build --release --quiet; BIN=./target/release/entiserve; }
dir=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$dir"' EXIT
ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve \
  --bind "127.0.0.1:$PORT" --data-dir "$dir/data" --entities entities 2>"$dir/server.log" &
pid=$!
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.1; done
base="http://127.0.0.1:$PORT"
auth="admin:bench"
for i in $(seq 1 100); do
  curl -sf -u "$auth" -X POST "$base/campaigns" -H 'content-type: application/json' \
    -d "{\"name\":\"seed $i\"}" >/dev/null
done
cat > "$dir/get.lua" <<'LUA'
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/campaigns/" .. (n % 100 + 1))
end
LUA
cat > "$dir/create.lua" <<'LUA'
wrk.method = "POST"
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"name":"bench","type":2,"description":"created by wrk","is_active":true}'
LUA
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
run() { # name script path
  local out=()
  for _ in $(seq 1 "$RUNS"); do
    local rps non2xx
    res=$(wrk -t2 -c32 -d"$DURATION" -s "$dir/$2" "$base$3" 2>&1)
    rps=$(echo "$res" | awk '/Requests\/sec/ {print int($2)}')
    non2xx=$(echo "$res" | awk '/Non-2xx/ {print $NF}')
    if [ -n "$non2xx" ]; then echo "$1: $non2xx non-2xx responses" >&2; exit 1; fi
    out+=("$rps")
  done
  printf '%s req/s: runs %s, median %s\n' "$1" "${out[*]}" "$(printf '%s\n' "${out[@]}" | median)"
}
run "GET /campaigns/<id>" get.lua /
run "POST /campaigns" create.lua /campaigns
