#!/usr/bin/env bash
# The HTTP path against the framework's own ceiling: wrk with 2 threads and 32 connections on
# the same machine, turn by turn in each run,
#
# - `examples/min_poem.rs`: a poem server answering `GET /healthz` with a fixed body (same
#   tokio runtime, allocator and release profile);
# - entiserve's `/healthz` (no database, no credentials);
# - entiserve's `GET /campaigns/<id>` with HTTP Basic on every request (SQLite, one object).
#
# Prints each run, the medians of RUNS runs and the two ratios (`/healthz` to the minimal server,
# GET by id to `/healthz`; the targets are 0.8 each), then the same as a Markdown table.
# COMPARE_BIN adds a second entiserve (another build: an A/B), measured in the same turns.
# SPREAD=N adds, in the same turns, GET by id over N objects in turn (uploaded first): with N
# well beyond the reads of one snapshot (10 ms), no read finds its row remembered by its
# thread's snapshot (see the book's design choices), so each one reads SQLite and writes its
# JSON. Each server measured gets the N objects.
# LAYERS=1 adds, in the same turns, the minimal server with entiserve's layers added one at a
# time (`min_poem --layer`: its connection handling, the header timeout, the fixed API's
# poem-openapi service answering `/healthz`), each with its ratio to the minimal server: what
# each layer costs a request. entiserve's own `/healthz` adds its front layer to the last.
#
#   benches/http_path.sh                       # builds both binaries
#   RUNS=7 DURATION=8s benches/http_path.sh
#   BIN=/path/entiserve MIN_BIN=/path/min_poem benches/http_path.sh   # nothing built
#   COMPARE_BIN=/path/to/older/entiserve benches/http_path.sh
#   LAYERS=1 benches/http_path.sh
#   SPREAD=100000 benches/http_path.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
RUNS="${RUNS:-5}"
DURATION="${DURATION:-10s}"
WARMUP="${WARMUP:-2s}"
PORT="${PORT:-18181}"
MIN_PORT="${MIN_PORT:-18182}"
COMPARE_PORT="${COMPARE_PORT:-18183}"
COMPARE_BIN="${COMPARE_BIN:-}"
LAYERS="${LAYERS:-}"
LAYER_PORT="${LAYER_PORT:-18184}"
SPREAD="${SPREAD:-}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
MIN_BIN="${MIN_BIN:-}"
target="${CARGO_TARGET_DIR:-target}/release"
entiserve_bin
if [ -z "$MIN_BIN" ]; then
  cargo build --release --quiet --example min_poem
  MIN_BIN="$target/examples/min_poem"
fi
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
up() {
  for _ in $(seq 1 100); do curl -sf "$1/healthz" >/dev/null && return 0; sleep 0.1; done
  echo "no answer from $1" >&2
  exit 1
}
# start NAME BINARY PORT: an entiserve on SQLite in its own data directory, one campaign in it;
# sets $id to the campaign's id.
start() {
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$2" serve \
    --bind "127.0.0.1:$3" --data-dir "$dir/$1" --entities entities 2>"$dir/$1.log" &
  pids+=($!)
  up "http://127.0.0.1:$3"
  id=$(curl -sf -u admin:bench -X POST "http://127.0.0.1:$3/campaigns" \
    -H 'content-type: application/json' -d '{"name":"http path"}' |
    sed -E 's/.*"id": *([0-9]+).*/\1/')
  curl -sf -u admin:bench "http://127.0.0.1:$3/campaigns/$id" >/dev/null
  if [ -n "$SPREAD" ]; then spread "$1" "$3"; fi
}
# spread NAME PORT: uploads SPREAD campaigns and writes $dir/NAME.lua, which asks for them in
# turn (their ids follow the first one's).
spread() {
  local csv="$dir/$1-spread.csv" first
  awk -v n="$SPREAD" 'BEGIN { print "op,name,type"; for (i = 1; i <= n; i++) print "c,spread " i ",1" }' \
    >"$csv"
  curl -sf -u admin:bench -F entity=campaigns -F "csvfile=@$csv" \
    "http://127.0.0.1:$2/tools/uploader.ex.php" -o "$dir/$1-result.csv"
  first=$(awk -F, 'NR == 2 { print $2 }' "$dir/$1-result.csv")
  [ -n "$first" ] || { echo "the upload of $SPREAD campaigns gave no ids" >&2; exit 1; }
  cat >"$dir/$1.lua" <<LUA
wrk.headers["Authorization"] = "Basic YWRtaW46YmVuY2g="
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/campaigns/" .. ((n * 7919) % $SPREAD + $first))
end
LUA
}
"$MIN_BIN" --bind "127.0.0.1:$MIN_PORT" 2>"$dir/min.log" &
pids+=($!)
up "http://127.0.0.1:$MIN_PORT"
start a "$BIN" "$PORT"
a_id=$id
if [ -n "$COMPARE_BIN" ]; then
  start b "$COMPARE_BIN" "$COMPARE_PORT"
  b_id=$id
fi
auth="Authorization: Basic YWRtaW46YmVuY2g="
# The measured endpoints: name, URL, with credentials (1), not (0), or a wrk script.
names=("min_poem /healthz" "/healthz" "GET /campaigns/<id>")
urls=("http://127.0.0.1:$MIN_PORT/healthz" "http://127.0.0.1:$PORT/healthz"
  "http://127.0.0.1:$PORT/campaigns/$a_id")
creds=(0 0 1)
if [ -n "$COMPARE_BIN" ]; then
  names+=("/healthz (COMPARE_BIN)" "GET /campaigns/<id> (COMPARE_BIN)")
  urls+=("http://127.0.0.1:$COMPARE_PORT/healthz" "http://127.0.0.1:$COMPARE_PORT/campaigns/$b_id")
  creds+=(0 1)
fi
# With SPREAD: GET by id over the N objects, from index `first_spread` on.
first_spread=${#urls[@]}
if [ -n "$SPREAD" ]; then
  names+=("GET /campaigns/<id>, $SPREAD in turn")
  urls+=("http://127.0.0.1:$PORT/")
  creds+=("$dir/a.lua")
  if [ -n "$COMPARE_BIN" ]; then
    names+=("GET /campaigns/<id>, $SPREAD in turn (COMPARE_BIN)")
    urls+=("http://127.0.0.1:$COMPARE_PORT/")
    creds+=("$dir/b.lua")
  fi
fi
# With LAYERS: the minimal server with each layer, from index `first_layer` on.
layers=(serve timed api)
first_layer=${#urls[@]}
if [ -n "$LAYERS" ]; then
  for k in "${!layers[@]}"; do
    port=$((LAYER_PORT + k))
    "$MIN_BIN" --bind "127.0.0.1:$port" --layer "${layers[$k]}" 2>"$dir/layer-$k.log" &
    pids+=($!)
    up "http://127.0.0.1:$port"
    names+=("min_poem --layer ${layers[$k]} /healthz")
    urls+=("http://127.0.0.1:$port/healthz")
    creds+=(0)
  done
fi
# wrk_rps SECONDS URL CREDS: requests a second; fails on any non-2xx answer.
wrk_rps() {
  local res non2xx
  if [ "$3" = 1 ]; then
    res=$(wrk -t2 -c32 -d"$1" -H "$auth" "$2" 2>&1)
  elif [ "$3" != 0 ]; then
    res=$(wrk -t2 -c32 -d"$1" -s "$3" "$2" 2>&1)
  else
    res=$(wrk -t2 -c32 -d"$1" "$2" 2>&1)
  fi
  non2xx=$(echo "$res" | awk '/Non-2xx/ {print $NF}')
  if [ -n "$non2xx" ]; then echo "$2: $non2xx non-2xx responses" >&2; exit 1; fi
  echo "$res" | awk '/Requests\/sec/ {print int($2)}'
}
median() { tr ' ' '\n' | sed '/^$/d' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
for i in "${!urls[@]}"; do wrk_rps "$WARMUP" "${urls[$i]}" "${creds[$i]}" >/dev/null; done
runs=()
for r in $(seq 1 "$RUNS"); do
  line=""
  for i in "${!urls[@]}"; do
    rps=$(wrk_rps "$DURATION" "${urls[$i]}" "${creds[$i]}")
    runs[$i]="${runs[$i]:-} $rps"
    line="$line ${names[$i]}=$rps"
  done
  echo "run $r:$line"
done
meds=()
for i in "${!urls[@]}"; do
  meds[$i]=$(echo "${runs[$i]}" | median)
  printf '%s req/s: runs%s, median %s\n' "${names[$i]}" "${runs[$i]}" "${meds[$i]}"
done
echo
printf '/healthz / min_poem:  %s (target 0.80)\n' "$(ratio "${meds[1]}" "${meds[0]}")"
printf 'GET by id / /healthz: %s (target 0.80)\n' "$(ratio "${meds[2]}" "${meds[1]}")"
if [ -n "$COMPARE_BIN" ]; then
  printf 'COMPARE_BIN /healthz / min_poem:  %s\n' "$(ratio "${meds[3]}" "${meds[0]}")"
  printf 'COMPARE_BIN GET by id / /healthz: %s\n' "$(ratio "${meds[4]}" "${meds[3]}")"
fi
echo
echo "| server | route | req/s (median of $RUNS) | runs | ratio |"
echo "| --- | --- | ---: | --- | ---: |"
row() { printf '| %s | %s | %s | %s | %s |\n' "$1" "$2" "${meds[$3]}" "$(echo "${runs[$3]}" | sed 's/^ //; s/ /, /g')" "$4"; }
row "min_poem" "GET /healthz" 0 "1.00"
row "entiserve (BIN)" "GET /healthz" 1 "$(ratio "${meds[1]}" "${meds[0]}") of min_poem"
row "entiserve (BIN)" "GET /campaigns/<id>, Basic" 2 "$(ratio "${meds[2]}" "${meds[1]}") of its /healthz"
if [ -n "$COMPARE_BIN" ]; then
  row "entiserve (COMPARE_BIN)" "GET /healthz" 3 "$(ratio "${meds[3]}" "${meds[0]}") of min_poem"
  row "entiserve (COMPARE_BIN)" "GET /campaigns/<id>, Basic" 4 "$(ratio "${meds[4]}" "${meds[3]}") of its /healthz"
fi
if [ -n "$SPREAD" ]; then
  i=$first_spread
  row "entiserve (BIN)" "GET /campaigns/<id>, Basic, $SPREAD in turn" "$i" "$(ratio "${meds[$i]}" "${meds[1]}") of its /healthz"
  if [ -n "$COMPARE_BIN" ]; then
    row "entiserve (COMPARE_BIN)" "GET /campaigns/<id>, Basic, $SPREAD in turn" "$((i + 1))" "$(ratio "${meds[$((i + 1))]}" "${meds[3]}") of its /healthz"
  fi
fi
if [ -n "$LAYERS" ]; then
  for k in "${!layers[@]}"; do
    i=$((first_layer + k))
    row "min_poem --layer ${layers[$k]}" "GET /healthz" "$i" "$(ratio "${meds[$i]}" "${meds[0]}") of min_poem"
  done
fi
