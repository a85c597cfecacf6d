#!/usr/bin/env bash
# What access rules per record (CONTRACT.md section 11) cost, each figure against the same work
# on an identical table without rules, measured in the same run on the same server. Entities:
# benches/rules/ (users, `notes` with the rules, `notes_open` without them). 100 users (role
# `user`) own ROWS notes in each table, row i belonging to user i mod 100 (a user's notes spread
# over the whole table); the caller is one of them, u042. Prints the median of RUNS runs of each
# figure, its baseline and the ratio, then a Markdown table:
#
# 1. A list page of 100 under `list: owner_id = @caller.id` (GET /notes?limit=100, median
#    latency of REQS requests on one kept-alive connection, HTTP Basic), and the page by `cursor`
#    after 90% of the caller's notes. Baseline: the same page of `notes_open` with
#    `owner_id=<caller>` (the same rows, counted the same way); the page of `notes_open` without
#    that filter (what a user read before rules) is shown beside it. Targets: <= 5 ms, <= 1.2x.
# 2. GET by id under `view: owner_id = @caller.id`, 100 of the caller's ids (spread over the
#    table) in turn, wrk with 2 threads and 32 connections for DURATION, as benches/crud.sh.
#    Baseline: the same ids in `notes_open`. Target: req/s ratio >= 0.9.
# 3. A synchronous CSV upload of ROWS creates by the caller (columns title, body: no owner_id)
#    into `notes` (`create: "@caller.role != 'guest'"`, `owner_id` defaulting to `@caller.id`),
#    against the same rows into `notes_open` with an `owner_id` column holding the caller's id
#    (the same rows stored, references checked alike), each on a fresh server and database,
#    UPLOAD_RUNS times in alternating order. Target: time ratio <= 1.1.
#
#   benches/rules.sh                 # SQLite in a temp dir
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres benches/rules.sh
#                                    # PostgreSQL: scratch databases on that server, dropped after
#   SMALL=1 benches/rules.sh         # a quick run: 20,000 rows, 3 runs, wrk for 3 s
#   RULES=0 benches/rules.sh         # `notes` with today's { read: user, write: user } and no
#                                    # default: the mechanics, on a server without the rules
#   BIN=/path/to/other/entiserve benches/rules.sh   # another binary, nothing built
#   Also: ROWS (1000000), RUNS (5), UPLOAD_RUNS (RUNS), DURATION (10s), REQS (200, after WARMUP 20),
#   PORT (18211).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
if [ "${SMALL:-0}" = 1 ]; then
  ROWS="${ROWS:-20000}"; RUNS="${RUNS:-3}"; DURATION="${DURATION:-3s}"
fi
ROWS="${ROWS:-1000000}"
RUNS="${RUNS:-5}"
UPLOAD_RUNS="${UPLOAD_RUNS:-$RUNS}"
DURATION="${DURATION:-10s}"
REQS="${REQS:-200}"
WARMUP="${WARMUP:-20}"
PORT="${PORT:-18211}"
RULES="${RULES:-1}"
DATABASE_URL="${DATABASE_URL:-}"
USERS=100
CALLER=u042
PASSWORD=benchpass
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
case "$DATABASE_URL" in
  postgres:* | postgresql:*) pg=1 ;;
  "") pg=0 ;;
  *) echo "DATABASE_URL must be postgres:// (or unset, for SQLite)" >&2; exit 1 ;;
esac
if [ "$pg" = 1 ]; then
  command -v psql >/dev/null || { echo "install psql (postgresql-client)" >&2; exit 1; }
fi
[ "$ROWS" -ge 20000 ] || { echo "ROWS must be at least 20000 (200 notes a user)" >&2; exit 1; }
entiserve_bin
dir=$(mktemp -d)
pid=
scratch=
cleanup() {
  [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  if [ -n "$scratch" ]; then
    psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS \"$scratch\" WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT

# The definitions: benches/rules/ as they are, or with RULES=0 `notes` given today's access and
# no default, so that a server without the rules serves the same tables.
mkdir "$dir/entities"
cp benches/rules/users.yaml benches/rules/notes_open.yaml "$dir/entities/"
if [ "$RULES" = 1 ]; then
  cp benches/rules/notes.yaml "$dir/entities/"
else
  sed -e '/^access:$/,/^fields:$/{/^fields:$/!d}' -e '/^fields:$/i access: { read: user, write: user }' \
    -e 's/, default: "@caller.id"//' benches/rules/notes.yaml > "$dir/entities/notes.yaml"
fi
if ! "$BIN" check --entities "$dir/entities" >"$dir/check.log" 2>&1; then
  cat "$dir/check.log" >&2
  echo "$BIN refuses the definitions; RULES=0 measures the mechanics without the rules" >&2
  exit 1
fi

base="http://127.0.0.1:$PORT"
auth="admin:bench"
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "n/a"}'; }
fail() { echo "$*" >&2; exit 1; }

# new_db: a scratch database on DATABASE_URL's server; sets $scratch and $db_url.
new_db() {
  scratch="entiserve_rules_$$_$RANDOM"
  psql -q "$DATABASE_URL" -c "CREATE DATABASE \"$scratch\"" >/dev/null
  db_url=$(echo "$DATABASE_URL" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$scratch#")
}
drop_db() {
  psql -q "$DATABASE_URL" -c "DROP DATABASE IF EXISTS \"$scratch\" WITH (FORCE)" >/dev/null
  scratch=
}
start_server() { # data_dir [database_url]
  local args=(serve --bind "127.0.0.1:$PORT" --data-dir "$1" --entities "$dir/entities")
  [ -z "${2:-}" ] || args+=(--database-url "$2")
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" "${args[@]}" 2>"$dir/server.log" &
  pid=$!
  for _ in $(seq 1 200); do curl -sf "$base/healthz" >/dev/null && return; sleep 0.05; done
  cat "$dir/server.log" >&2
  fail "server did not start"
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
# fresh_server: a server on a new data directory and (PostgreSQL) a new scratch database.
fresh_server() {
  rm -rf "$dir/data"
  db_url=
  [ "$pg" = 0 ] || new_db
  start_server "$dir/data" "$db_url"
}
end_server() { stop_server; [ -z "$scratch" ] || drop_db; }
# create_users N: u001..uNNN, role user, in one synchronous batch by the admin; sets $user_ids
# (their ids in login order, comma-separated).
create_users() {
  awk -v n="$1" -v p="$PASSWORD" 'BEGIN {
    printf "[";
    for (i = 1; i <= n; i++)
      printf "%s{\"login\":\"u%03d\",\"password\":\"%s\",\"role\":\"user\"}", (i > 1 ? "," : ""), i, p;
    print "]"
  }' > "$dir/users.json"
  curl -sf -u "$auth" "$base/users?bgrs=false" -H 'content-type: application/json' \
    --data-binary "@$dir/users.json" -o "$dir/users.out"
  [ "$(grep -o '"status":200' "$dir/users.out" | wc -l)" = "$1" ] || fail "creating users: $(head -c 500 "$dir/users.out")"
  user_ids=$(curl -sf -u "$auth" "$base/users?role=user&sort=login&fields=id&limit=$1" |
    tr -c '0-9\n' ' ' | awk '{for (i = 1; i <= NF; i++) print $i}' | paste -sd, -)
}
caller_id() { echo "$user_ids" | cut -d, -f"$((10#${CALLER#u}))"; }
# upload AUTH ENTITY FILE: a synchronous upload; sets $ms, fails unless every row is OK.
upload() {
  local t0 t1 ok
  t0=$(now_ms)
  curl -sf -u "$1" -F "entity=$2" -F "csvfile=@$3" "$base/tools/uploader.ex.php" -o "$dir/result.csv" ||
    fail "upload into $2 failed"
  t1=$(now_ms)
  ok=$(grep -c '^OK,' "$dir/result.csv" || true)
  [ "$ok" = "$ROWS" ] || fail "upload into $2: $ok of $ROWS rows OK; first other: $(grep -v '^OK,' "$dir/result.csv" | sed -n 2p)"
  ms=$((t1 - t0))
}
total() { # AUTH URL -> X-Total-Count
  curl -sf -u "$1" -D - -o /dev/null "$2" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-total-count" {print $2}'
}
next_link() { # AUTH URL -> the absolute URL of its Link rel="next"
  local l
  l=$(curl -sf -u "$1" -D - -o /dev/null "$2" | tr -d '\r' |
    awk 'tolower($1) == "link:" {print}' | sed -E 's/^[^<]*<([^>]*)>.*/\1/')
  [ -n "$l" ] || fail "no Link rel=next from $2"
  echo "$base$l"
}
# latency URL AUTH: WARMUP then REQS requests on one kept-alive connection; sets $lat (median ms).
latency() {
  local args=() i
  for i in $(seq 1 $((WARMUP + REQS))); do args+=(-o /dev/null "$1"); done
  curl -s -u "$2" -w '%{http_code} %{time_total}\n' "${args[@]}" > "$dir/latency.txt"
  if awk '$1 != 200 {bad = 1} END {exit !bad}' "$dir/latency.txt"; then
    fail "GET $1: $(awk '$1 != 200 {print $1}' "$dir/latency.txt" | sort | uniq -c | tr '\n' ' ')"
  fi
  lat=$(tail -n "$REQS" "$dir/latency.txt" | awk '{printf "%.3f\n", $2 * 1000}' | median)
}
# wrk_run SCRIPT: one wrk run; sets $rps, fails on any non-2xx response or socket error.
wrk_run() {
  local res
  res=$(wrk -t2 -c32 -d"$DURATION" -s "$dir/$1" "$base/" 2>&1)
  if echo "$res" | grep -q 'Non-2xx\|Socket errors'; then echo "$res" >&2; fail "wrk $1: errors"; fi
  rps=$(echo "$res" | awk '/Requests\/sec/ {print int($2)}')
}
gen_load() { # FILE: ROWS notes, row i owned by user i mod USERS, owner_id given
  awk -v n="$ROWS" -v ids="$user_ids" 'BEGIN {
    k = split(ids, u, ",");
    print "op,title,body,owner_id";
    for (i = 1; i <= n; i++)
      printf "c,note %d,the text of note %d of the access rules benchmark,%s\n", i, i, u[(i - 1) % k + 1]
  }' > "$1"
}
gen_upload() { # FILE [OWNER]: ROWS notes without owner_id, or with OWNER as every owner_id
  awk -v n="$ROWS" -v owner="${2:-}" 'BEGIN {
    print "op,title,body" (owner == "" ? "" : ",owner_id");
    for (i = 1; i <= n; i++)
      printf "c,note %d,the text of note %d of the access rules benchmark%s\n", i, i, (owner == "" ? "" : "," owner)
  }' > "$1"
}

backend=SQLite
[ "$pg" = 0 ] || backend=PostgreSQL
mode="rules of benches/rules/notes.yaml"
[ "$RULES" = 1 ] || mode="RULES=0: notes with { read: user, write: user }, no default"
echo "$backend, $ROWS notes per table, $USERS users, caller $CALLER, runs $RUNS (uploads $UPLOAD_RUNS), $(nproc) cores; $mode"

# --- Lists and GET by id: one server, both tables loaded by the admin's upload. ---
fresh_server
create_users "$USERS"
[ "$(echo "$user_ids" | tr ',' '\n' | wc -l)" = "$USERS" ] || fail "expected $USERS user ids, got $user_ids"
caller=$(caller_id)
cauth="$CALLER:$PASSWORD"
gen_load "$dir/load.csv"
upload "$auth" notes "$dir/load.csv"; printf 'loaded notes: %.2f s' "$(ratio "$ms" 1000)"
upload "$auth" notes_open "$dir/load.csv"; printf ', notes_open: %.2f s\n' "$(ratio "$ms" 1000)"
# Statistics for the planner after the bulk load (autovacuum would take them later), both tables.
[ "$pg" = 0 ] || psql -q "$db_url" -c "VACUUM ANALYZE" >/dev/null

own=$(total "$auth" "$base/notes_open?owner_id=$caller&limit=0")
listed=$(total "$cauth" "$base/notes?limit=0")
if [ "$RULES" = 1 ]; then
  [ "$listed" = "$own" ] || fail "the caller lists $listed notes, owns $own: is the list rule applied?"
else
  [ "$listed" = "$ROWS" ] || fail "the caller lists $listed notes of $ROWS"
fi
echo "the caller owns $own notes and lists $listed of /notes"
# The page by cursor: the one after 90% of the caller's notes (at least a full page before the end),
# reached through the Link of the page before it.
deep=$((own * 9 / 10)); [ "$deep" -le $((own - 100)) ] || deep=$((own - 100))
deep_open=$((ROWS * 9 / 10))
page_ours="$base/notes?limit=100"
page_base="$base/notes_open?owner_id=$caller&limit=100"
page_open="$base/notes_open?limit=100"
cursor_ours=$(next_link "$cauth" "$base/notes?limit=100&offset=$((deep - 100))")
cursor_base=$(next_link "$cauth" "$base/notes_open?owner_id=$caller&limit=100&offset=$((deep - 100))")
cursor_open=$(next_link "$cauth" "$base/notes_open?limit=100&offset=$((deep_open - 100))")

declare -A runs
for i in $(seq 1 "$RUNS"); do
  for k in page_ours page_base page_open cursor_ours cursor_base cursor_open; do
    latency "${!k}" "$cauth"; runs[$k]+="$lat "
  done
done
declare -A med
for k in page_ours page_base page_open cursor_ours cursor_base cursor_open; do
  med[$k]=$(echo "${runs[$k]}" | tr ' ' '\n' | grep . | median)
  printf '%-12s ms: runs %s, median %s\n' "$k" "${runs[$k]% }" "${med[$k]}"
done

# GET by id: 100 of the caller's notes, spread over the table, the same ids in both tables.
ids() { # ENTITY -> Lua list of 100 of the caller's ids
  curl -sf -u "$auth" "$base/$1?owner_id=$caller&sort=id&fields=id&limit=10000" |
    tr -c '0-9\n' ' ' | awk '{for (i = 1; i <= NF; i++) print $i}' |
    awk -v n="$own" 'BEGIN {k = int(n / 100); if (k < 1) k = 1} (NR - 1) % k == 0 && c < 100 {c++; print}' |
    paste -sd, -
}
basic=$(printf '%s' "$cauth" | base64 -w0)
for e in notes notes_open; do
  cat > "$dir/get_$e.lua" <<LUA
wrk.headers["Authorization"] = "Basic $basic"
local ids = {$(ids "$e")}
local n = 0
request = function()
  n = n + 1
  return wrk.format("GET", "/$e/" .. ids[n % #ids + 1])
end
LUA
done
if [ "$RULES" = 1 ]; then
  other=$(curl -sfg -u "$auth" "$base/notes?owner_id[ne]=$caller&fields=id&limit=1" | tr -c '0-9' ' ' | awk '{print $1}')
  code=$(curl -s -o /dev/null -w '%{http_code}' -u "$cauth" "$base/notes/$other")
  [ "$code" = 404 ] || fail "GET /notes/$other (another user's) answered $code to the caller, not 404"
fi
get_ours=(); get_base=()
for i in $(seq 1 "$RUNS"); do
  if [ $((i % 2)) = 1 ]; then
    wrk_run get_notes.lua; get_ours+=("$rps"); wrk_run get_notes_open.lua; get_base+=("$rps")
  else
    wrk_run get_notes_open.lua; get_base+=("$rps"); wrk_run get_notes.lua; get_ours+=("$rps")
  fi
done
get_ours_med=$(printf '%s\n' "${get_ours[@]}" | median)
get_base_med=$(printf '%s\n' "${get_base[@]}" | median)
printf 'GET /notes/<id> req/s: runs %s, median %s\n' "${get_ours[*]}" "$get_ours_med"
printf 'GET /notes_open/<id> req/s: runs %s, median %s\n' "${get_base[*]}" "$get_base_med"
end_server

# --- Uploads by the caller: a fresh server and database for each. ---
gen_upload "$dir/upload.csv"
up_ours=(); up_base=()
upload_fresh() { # ENTITY: sets $ms
  fresh_server
  create_users 1
  local file="$dir/upload.csv"
  if [ "$1" = notes_open ]; then
    # The same rows stored: the caller's id given where `notes` defaults to it.
    file="$dir/upload_owned.csv"
    gen_upload "$file" "$user_ids"
  fi
  upload "u001:$PASSWORD" "$1" "$file"
  if [ "$RULES" = 1 ] && [ "$1" = notes ]; then
    local n
    n=$(total "$auth" "$base/notes?owner_id=$user_ids&limit=0")
    [ "$n" = "$ROWS" ] || fail "$n of $ROWS uploaded notes have the caller as owner_id"
  fi
  end_server
}
for i in $(seq 1 "$UPLOAD_RUNS"); do
  if [ $((i % 2)) = 1 ]; then
    upload_fresh notes; up_ours+=("$ms"); upload_fresh notes_open; up_base+=("$ms")
  else
    upload_fresh notes_open; up_base+=("$ms"); upload_fresh notes; up_ours+=("$ms")
  fi
done
up_ours_med=$(printf '%s\n' "${up_ours[@]}" | median)
up_base_med=$(printf '%s\n' "${up_base[@]}" | median)
printf 'upload into notes ms: runs %s, median %s\n' "${up_ours[*]}" "$up_ours_med"
printf 'upload into notes_open ms: runs %s, median %s\n' "${up_base[*]}" "$up_base_med"

# --- The table. ---
# With RULES=0 there is nothing to meet: the column says so beside what it computed.
met() {
  local m
  m=$(awk "BEGIN {print ($1) ? \"yes\" : \"no\"}")
  if [ "$RULES" = 1 ]; then echo "$m"; else echo "$m (no rules)"; fi
}
r1=$(ratio "${med[page_ours]}" "${med[page_base]}")
r1o=$(ratio "${med[page_ours]}" "${med[page_open]}")
r2=$(ratio "${med[cursor_ours]}" "${med[cursor_base]}")
r2o=$(ratio "${med[cursor_ours]}" "${med[cursor_open]}")
r3=$(ratio "$get_ours_med" "$get_base_med")
r4=$(ratio "$up_ours_med" "$up_base_med")
echo
echo "$backend, $ROWS notes per table owned by $USERS users, medians of $RUNS runs (uploads: $UPLOAD_RUNS); $mode"
echo
echo "| figure | ours | baseline | ratio | target | met |"
echo "| --- | ---: | --- | ---: | --- | --- |"
printf '| list page of 100, `list: owner_id = @caller.id`, ms | %.2f | %.2f (`notes_open?owner_id=<caller>`) | %s | <= 5 ms, <= 1.2 | %s |\n' \
  "${med[page_ours]}" "${med[page_base]}" "$r1" "$(met "${med[page_ours]} <= 5 && $r1 <= 1.2")"
printf '| the same, against the unfiltered page, ms | %.2f | %.2f (`notes_open`) | %s | | |\n' \
  "${med[page_ours]}" "${med[page_open]}" "$r1o"
printf '| page by `cursor` after %s of the caller'"'"'s %s notes, ms | %.2f | %.2f (`notes_open?owner_id=<caller>`) | %s | <= 5 ms, <= 1.2 | %s |\n' \
  "$deep" "$own" "${med[cursor_ours]}" "${med[cursor_base]}" "$r2" "$(met "${med[cursor_ours]} <= 5 && $r2 <= 1.2")"
printf '| the same, against the unfiltered page after row %s, ms | %.2f | %.2f (`notes_open`) | %s | | |\n' \
  "$deep_open" "${med[cursor_ours]}" "${med[cursor_open]}" "$r2o"
printf '| GET by id, `view: owner_id = @caller.id`, wrk -t2 -c32, req/s | %s | %s (`notes_open`) | %s | >= 0.9 | %s |\n' \
  "$get_ours_med" "$get_base_med" "$r3" "$(met "$r3 >= 0.9")"
printf '| upload of %s creates, `create: "@caller.role != '"'"'guest'"'"'"`, `owner_id` `default: "@caller.id"`, s | %.2f | %.2f (`notes_open`) | %s | <= 1.1 | %s |\n' \
  "$ROWS" "$(ratio "$up_ours_med" 1000)" "$(ratio "$up_base_med" 1000)" "$r4" "$(met "$r4 <= 1.1")"
