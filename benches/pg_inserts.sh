#!/usr/bin/env bash
# What the database alone pays for each create on PostgreSQL: `pgbench -c 32 -j 2 -M prepared`
# running the server's own single-row INSERT into `campaigns` on a scratch database the server
# set up (its tables, indexes and triggers), with the server running beside it (its live
# changes sequencer numbers what pgbench logs), first with the table's triggers disabled, then
# as the server leaves them. Prints the median of RUNS runs of each and the ratio.
#
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/pg_inserts.sh
#   BIN=/path/to/other/entiserve PG_URL=... benches/pg_inserts.sh   # another binary, nothing built
#   NO_BUILD=1 PG_URL=... benches/pg_inserts.sh   # the release binary as it is
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
RUNS="${RUNS:-3}"
SECS="${SECS:-6}"
PORT="${PORT:-18185}"
PG_URL="${PG_URL:?set PG_URL, for example postgres://postgres@127.0.0.1:5432/postgres}"
for c in pgbench psql curl; do
  command -v "$c" >/dev/null || { echo "install $c" >&2; exit 1; }
done
entiserve_bin
scratch="entiserve_inserts_$$"
url=$(echo "$PG_URL" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$scratch#")
dir=$(mktemp -d)
pid=
cleanup() {
  [ -z "$pid" ] || { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; }
  psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS \"$scratch\"" >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
psql -q "$PG_URL" -c "CREATE DATABASE \"$scratch\"" >/dev/null
DATABASE_URL="$url" ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve \
  --bind "127.0.0.1:$PORT" --data-dir "$dir/data" --entities entities 2>"$dir/server.log" &
pid=$!
wait_healthz "http://127.0.0.1:$PORT" "$dir/server.log"
# One create through the server, so that pgbench's INSERT names the columns the server fills.
curl -sf -u admin:bench -X POST "http://127.0.0.1:$PORT/campaigns" \
  -H 'content-type: application/json' -d '{"name":"seed"}' >/dev/null
cols=$(psql -qAt "$url" -c "SELECT string_agg(quote_ident(column_name), ', ' ORDER BY ordinal_position) \
  FROM information_schema.columns WHERE table_name = 'campaigns' AND column_name <> 'id'")
vals=$(psql -qAt "$url" -c "SELECT string_agg(CASE WHEN column_name = 'name' THEN '''bench''' \
  ELSE quote_nullable(v) END, ', ' ORDER BY ordinal_position) FROM information_schema.columns, \
  LATERAL (SELECT (to_jsonb(c) ->> column_name) AS v FROM campaigns c LIMIT 1) x \
  WHERE table_name = 'campaigns' AND column_name <> 'id'")
echo "INSERT INTO campaigns ($cols) VALUES ($vals);" >"$dir/insert.sql"
triggers=$(psql -qAt "$url" -c "SELECT string_agg(tgname, ', ' ORDER BY tgname) FROM pg_trigger \
  WHERE tgrelid = 'campaigns'::regclass AND NOT tgisinternal")
echo "pgbench script: $(cat "$dir/insert.sql")"
echo "triggers on campaigns: ${triggers:-none}"
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# bench LABEL: RUNS runs of the INSERT; prints them, sets $med.
bench() {
  local out=() tps
  for _ in $(seq 1 "$RUNS"); do
    tps=$(pgbench -n -c 32 -j 2 -M prepared -T "$SECS" -f "$dir/insert.sql" "$url" 2>/dev/null |
      awk '/^tps/ {print int($3)}')
    out+=("$tps")
  done
  med=$(printf '%s\n' "${out[@]}" | median)
  printf '%-28s inserts/s: runs %s, median %s\n' "$1" "${out[*]}" "$med"
}
psql -q "$url" -c "ALTER TABLE campaigns DISABLE TRIGGER USER" >/dev/null
bench "triggers disabled"; none=$med
psql -q "$url" -c "ALTER TABLE campaigns ENABLE TRIGGER USER" >/dev/null
bench "as the server runs"; server=$med
awk -v a="$server" -v b="$none" 'BEGIN {printf "ratio (as the server runs / disabled): %.2f\n", a / b}'
