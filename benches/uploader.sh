#!/usr/bin/env bash
# Uploader benchmark: a 1,000,000-row create CSV uploaded synchronously, against the database's
# own import tool loading the same file into a table of the same definition, measured in the
# same run: `sqlite3 .import` + `INSERT ... SELECT` for SQLite, `psql \copy` + `INSERT ...
# SELECT` for PostgreSQL. Prints medians of RUNS runs, the ratio to the baseline, the target
# ratio (0.7 for SQLite, 1.0 for PostgreSQL) and the server's peak resident size (VmHWM, the
# highest of the runs; target 64 MB), then each backend's upload with 1% failing rows against its
# clean file's (limit 1.2). Each run's two times go to stderr as it ends.
#
#   benches/uploader.sh                       # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/uploader.sh   # and PostgreSQL
#   BIN=/path/to/entiserve benches/uploader.sh # that binary, nothing built (NO_BUILD=1: the
#                                             # release binary as it is)
#   COMPARE_BIN=/path/to/older/entiserve benches/uploader.sh   # A/B: the other binary, same runs
#   COMPARE_ENTITIES=/path/to/older/checkout/entities   # the other binary's own definitions
#                                                       # (default: this checkout's)
#   PG_ONLY=1 PG_URL=... benches/uploader.sh  # PostgreSQL rows only
#   STORAGE_URL=s3://entiserve-tests benches/uploader.sh   # files in an object store: each
#       upload gets a fresh prefix below it (removed afterwards from an S3 store at
#       AWS_ENDPOINT_URL); the AWS_* variables as for the server (scripts/seaweedfs.sh prints them)
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
ROWS="${ROWS:-1000000}"
RUNS="${RUNS:-3}"
PORT="${PORT:-18191}"
STORAGE_URL="${STORAGE_URL:-}"
command -v sqlite3 >/dev/null || { echo "install sqlite3 (apt-get install sqlite3)" >&2; exit 1; }
if [ -z "${BIN:-}" ]; then
  [ -n "${NO_BUILD:-}" ] || cargo build --release --quiet --bin entiserve
  BIN="${CARGO_TARGET_DIR:-./target}/release/entiserve"
fi
COMPARE_BIN="${COMPARE_BIN:-}"
COMPARE_ENTITIES="${COMPARE_ENTITIES:-entities}"
work=$(mktemp -d)
pid=""
prefix=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; remove_prefix; rm -rf "$work"; }
trap cleanup EXIT

campaign_rows "$ROWS" "$work/ok.csv"
campaign_rows "$ROWS" "$work/fail1.csv" 100

now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# With STORAGE_URL, every server start gets a prefix of its own below it.
new_prefix() { prefix="${STORAGE_URL%/}/uploader-$(date +%s)-$RANDOM"; }
# Removes the objects under the current prefix when it is in an S3 store at AWS_ENDPOINT_URL
# (SeaweedFS in the tests); other stores keep them.
remove_prefix() {
  [ -n "$prefix" ] && [ -n "${AWS_ENDPOINT_URL:-}" ] && [[ "$prefix" == s3://* ]] || { prefix=""; return 0; }
  local rest="${prefix#s3://}" keys
  local bucket="${rest%%/*}" path="${rest#*/}"
  s3() {
    curl -s --aws-sigv4 "aws:amz:${AWS_DEFAULT_REGION:-us-east-1}:s3" \
      --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X "$1" "$AWS_ENDPOINT_URL/$2"
  }
  for _ in $(seq 1 100); do
    keys=$(s3 GET "$bucket?list-type=2&max-keys=1000&prefix=${path//\//%2F}%2F" |
      grep -o '<Key>[^<]*</Key>' | sed -e 's/<Key>//' -e 's/<\/Key>//' || true)
    [ -z "$keys" ] && break
    while read -r key; do s3 DELETE "$bucket/$key" >/dev/null; done <<<"$keys"
  done
  prefix=""
}

start_server() { # data_dir [database_url] [binary]
  local bin="${3:-$BIN}" ents=entities
  [ -n "${3:-}" ] && ents="$COMPARE_ENTITIES"
  local args=(serve --bind "127.0.0.1:$PORT" --data-dir "$1" --entities "$ents")
  [ -n "${2:-}" ] && args+=(--database-url "$2")
  if [ -n "$STORAGE_URL" ]; then new_prefix; args+=(--storage-url "$prefix"); fi
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$bin" "${args[@]}" 2>"$work/server.log" &
  pid=$!
  for _ in $(seq 1 200); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && return; sleep 0.05; done
  echo "server did not start" >&2; cat "$work/server.log" >&2; exit 1
}
stop_server() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""; }

upload_once() { # file database_url [binary] -> "ms rss_kb ok_rows"
  local db="${2:-}"
  rm -rf "$work/data"
  start_server "$work/data" "$db" "${3:-}"
  local t0 t1 rss ok
  t0=$(now_ms)
  curl -sf -u admin:bench -F entity=campaigns -F "csvfile=@$1" \
    "http://127.0.0.1:$PORT/tools/uploader.ex.php" -o "$work/result.csv"
  t1=$(now_ms)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  ok=$(grep -c '^OK,' "$work/result.csv" || true)
  stop_server
  remove_prefix
  echo "$((t1 - t0)) $rss $ok"
}

# The baseline puts the same rows into a table of the same definition as the server's
# `campaigns` (AUTOINCREMENT id, timestamps): .import into a staging table, then one INSERT.
import_once() { # file -> ms
  rm -f "$work/import.db"
  sqlite3 "$work/import.db" "PRAGMA journal_mode=WAL;" \
    "CREATE TABLE campaigns (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT, type INTEGER DEFAULT 1, description TEXT, is_active INTEGER DEFAULT 1, created_dt TEXT NOT NULL, updated_dt TEXT NOT NULL);" >/dev/null
  local t0 t1
  t0=$(now_ms)
  sqlite3 "$work/import.db" ".import --csv $1 staging" \
    "INSERT INTO campaigns (name, type, description, is_active, created_dt, updated_dt) SELECT name, type, description, is_active, datetime('now'), datetime('now') FROM staging;"
  t1=$(now_ms)
  echo $((t1 - t0))
}

# The PostgreSQL baseline: the same rows into a table of the same definition as the server's
# `campaigns` (identity id, timestamps), in a fresh database: `\copy` into a staging table,
# then one INSERT ... SELECT, in one psql session (which leaves out the rows whose `type` is not
# a number: PostgreSQL would refuse the whole statement for one of them).
copy_once() { # file -> ms
  local db
  db=$(pg_db)
  psql "$db" -qAt -c "CREATE TABLE campaigns (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, name TEXT, type BIGINT DEFAULT 1, description TEXT, is_active BOOLEAN DEFAULT true, created_dt TEXT NOT NULL, updated_dt TEXT NOT NULL, _rev BIGINT)" \
    -c "CREATE TABLE staging (op TEXT, name TEXT, type TEXT, description TEXT, is_active TEXT)" >/dev/null
  local t0 t1
  t0=$(now_ms)
  psql "$db" -qAt -c "\\copy staging FROM '$1' WITH (FORMAT csv, HEADER true)" \
    -c "INSERT INTO campaigns (name, type, description, is_active, created_dt, updated_dt) SELECT name, type::bigint, description, is_active::int::boolean, now()::text, now()::text FROM staging WHERE type ~ '^[0-9]+$'" >/dev/null
  t1=$(now_ms)
  psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS ${db##*/} WITH (FORCE)" >/dev/null
  echo $((t1 - t0))
}

pg_db() { # -> url of a fresh database
  local name="entiserve_bench_$RANDOM$RANDOM"
  psql "$PG_URL" -qAtc "CREATE DATABASE $name" >/dev/null
  echo "${PG_URL%/*}/$name"
}

row() { # label file database_url
  local times=() rss=() imports=() others=() ok="" other_ok=""
  for _ in $(seq 1 "$RUNS"); do
    if [ "${3:-}" = "pg" ]; then imports+=("$(copy_once "$2")"); else imports+=("$(import_once "$2")"); fi
    local db="${3:-}"
    [ "$db" = "pg" ] && db=$(pg_db)
    read -r ms kb ok < <(upload_once "$2" "$db")
    times+=("$ms"); rss+=("$kb")
    echo "$1, run ${#times[@]}: upload $ms ms, baseline ${imports[-1]} ms" >&2
    if [ -n "${3:-}" ]; then psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS ${db##*/} WITH (FORCE)" >/dev/null; fi
    if [ -n "$COMPARE_BIN" ]; then
      db="${3:-}"
      [ "$db" = "pg" ] && db=$(pg_db)
      read -r ms kb other_ok < <(upload_once "$2" "$db" "$COMPARE_BIN")
      others+=("$ms")
      echo "$1, run ${#others[@]}: COMPARE_BIN upload $ms ms" >&2
      if [ -n "${3:-}" ]; then psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS ${db##*/} WITH (FORCE)" >/dev/null; fi
    fi
  done
  local t i r
  t=$(printf '%s\n' "${times[@]}" | median)
  last_median="$t"
  i=$(printf '%s\n' "${imports[@]}" | median)
  r=$(printf '%s\n' "${rss[@]}" | sort -n | tail -n 1)
  local target=0.7 tool="sqlite3 .import"
  [ "${3:-}" = "pg" ] && target=1.0 tool="psql \\copy"
  printf '| %s | %s | %.2f s | %s: %.2f s | %.2f | %s | %d MB | %s |' "$1" "$ROWS" \
    "$(echo "$t / 1000" | bc -l)" "$tool" "$(echo "$i / 1000" | bc -l)" "$(echo "$t / $i" | bc -l)" "$target" "$((r / 1024))" "$ok"
  if [ -n "$COMPARE_BIN" ]; then
    local o
    o=$(printf '%s\n' "${others[@]}" | median)
    printf ' %.2f s (%s OK) | %.2f |' "$(echo "$o / 1000" | bc -l)" "$other_ok" "$(echo "$t / $o" | bc -l)"
  fi
  echo
}

echo "runs: $RUNS, rows: $ROWS, machine: $(nproc) cores, files: ${STORAGE_URL:-the data directory}"
echo
if [ -n "$COMPARE_BIN" ]; then
  echo "| backend, file | rows | upload (median) | baseline (median) | ratio | target ratio | peak RSS | rows OK | $COMPARE_BIN (median) | this / that |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
else
  echo "| backend, file | rows | upload (median) | baseline (median) | ratio | target ratio | peak RSS | rows OK |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- |"
fi
# failing_line BACKEND CLEAN_MS FAILING_MS: the upload with 1% failing rows against the clean
# file's, both medians of this invocation (the limit is 1.2).
failing_lines=()
failing_line() {
  failing_lines+=("$(printf '%s, 1%% failing rows against all rows valid: %.2f (limit 1.2)' \
    "$1" "$(echo "$3 / $2" | bc -l)")")
}
if [ -z "${PG_ONLY:-}" ]; then
  row "SQLite, all rows valid" "$work/ok.csv"
  clean="$last_median"
  row "SQLite, 1% failing rows" "$work/fail1.csv"
  failing_line SQLite "$clean" "$last_median"
fi
if [ -n "${PG_URL:-}" ]; then
  row "PostgreSQL, all rows valid" "$work/ok.csv" pg
  clean="$last_median"
  row "PostgreSQL, 1% failing rows" "$work/fail1.csv" pg
  failing_line PostgreSQL "$clean" "$last_median"
fi
echo
printf '%s\n' "${failing_lines[@]}"
