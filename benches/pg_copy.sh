#!/usr/bin/env bash
# What PostgreSQL's backend spends inserting an upload's rows with the server's statement (an
# `INSERT ... SELECT ... FROM UNNEST(...)`, 1,000 rows a statement) against a binary `COPY` of
# the same rows (1,000, 4,000 and 16,000 rows a copy), on the server's own `campaigns` table and
# insert trigger: the server sets up a fresh database and stops, then benches/pg_copy.py inserts
# ROWS rows each way, a commit every 16,000 rows, and prints the backend's CPU and the wall time
# (medians of RUNS runs). Needs psycopg (`pip install "psycopg[binary]"`).
#
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/pg_copy.sh
#   ROWS=300000 RUNS=3 BIN=/path/to/entiserve PG_URL=... benches/pg_copy.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
: "${PG_URL:?set PG_URL to a PostgreSQL server the benchmark may create a database on}"
ROWS="${ROWS:-300000}"
RUNS="${RUNS:-3}"
PORT="${PORT:-18195}"
python3 -c "import psycopg" 2>/dev/null || { echo 'install psycopg (pip install "psycopg[binary]")' >&2; exit 1; }
entiserve_bin
work=$(mktemp -d)
db="entiserve_copy_$RANDOM$RANDOM"
pid=""
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null
  wait 2>/dev/null
  psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
psql "$PG_URL" -qAtc "CREATE DATABASE $db" >/dev/null
url="${PG_URL%/*}/$db"
ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" \
  --data-dir "$work/data" --entities entities --database-url "$url" 2>"$work/server.log" &
pid=$!
wait_healthz "http://127.0.0.1:$PORT" "$work/server.log"
kill "$pid"
wait "$pid" 2>/dev/null || true
pid=""
python3 benches/pg_copy.py "$url" "$ROWS" "$RUNS"
