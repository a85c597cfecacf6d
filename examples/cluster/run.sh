#!/usr/bin/env bash
# Two entiserve servers behind nginx, on one PostgreSQL database and one S3-compatible store
# (SeaweedFS). A background upload goes in through the balancer; the server running it is
# killed with SIGKILL and its data directory removed; the other server finishes the upload, and
# the result comes back through the balancer with every row OK and every row applied once.
#
#   examples/cluster/run.sh                 # ROWS=300000 by default
#   ROWS=1000000 KEEP=1 examples/cluster/run.sh   # keep the temp dir (logs, nginx config)
#
# Needs: nginx (Debian's package; installed with apt-get when missing and run as root), jq,
# psql, curl and a PostgreSQL server at PG_URL (default postgres://postgres@127.0.0.1:5432/
# postgres, a role that may create databases). SeaweedFS: one already answering on
# 127.0.0.1:8333 is reused (bucket entiserve-tests, credentials entiserve/entiserve-secret as
# scripts/seaweedfs.sh makes them), else scripts/seaweedfs.sh starts one. Everything started
# here is stopped on exit: the servers, nginx, SeaweedFS if it was started here, the database
# and the objects under this run's prefix.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ROWS="${ROWS:-300000}"
PG_URL="${PG_URL:-postgres://postgres@127.0.0.1:5432/postgres}"
LB_PORT="${LB_PORT:-18300}"
PORTS=("${A_PORT:-18301}" "${B_PORT:-18302}")
KILL_AT="${KILL_AT:-20}" # percent of the rows done when the running server is killed
PASSWORD=cluster-example-password
LB="http://127.0.0.1:$LB_PORT"
AUTH="admin:$PASSWORD"

say() { printf '\033[1m== %s\033[0m\n' "$*"; }
now_ms() { date +%s%3N; }
secs() { awk -v ms="$1" 'BEGIN { printf "%.1f s", ms / 1000 }'; }

for tool in jq psql curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed (apt-get install $tool)" >&2; exit 1; }
done
if ! command -v nginx >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    say "installing nginx (apt-get install -y nginx)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx >/dev/null
  else
    echo "nginx is needed (apt-get install nginx)" >&2
    exit 1
  fi
fi
NGINX=$(command -v nginx)

if [ -z "${BIN:-}" ]; then
  say "building the release binary"
  cargo build --release --quiet
  BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release/entiserve"
fi

work=$(mktemp -d -t entiserve-cluster.XXXXXX)
chmod 755 "$work"
tag="cluster-$(date +%s)-$RANDOM"
pids=() # the two servers, by index 0 (A) and 1 (B)
names=(A B)
nginx_pid=""
sse_pid=""
weed_started=""
db_name=""
prefix=""

s3() { # METHOD PATH?QUERY: a signed request to the S3 endpoint
  curl -s --aws-sigv4 "aws:amz:$AWS_DEFAULT_REGION:s3" \
    --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" -X "$1" "$AWS_ENDPOINT_URL/$2"
}

remove_prefix() { # the objects this run stored, a listing page at a time
  local keys
  for _ in $(seq 1 100); do
    keys=$(s3 GET "$BUCKET?list-type=2&max-keys=1000&prefix=$prefix%2F" |
      grep -o '<Key>[^<]*</Key>' | sed -e 's/<Key>//' -e 's/<\/Key>//' || true)
    [ -z "$keys" ] && return 0
    while read -r key; do s3 DELETE "$BUCKET/$key" >/dev/null; done <<<"$keys"
  done
}

cleanup() {
  local rc=$?
  set +e
  [ -n "$sse_pid" ] && kill "$sse_pid" 2>/dev/null
  for pid in "${pids[@]}"; do [ -n "$pid" ] && kill "$pid" 2>/dev/null; done
  [ -n "$nginx_pid" ] && kill -QUIT "$nginx_pid" 2>/dev/null
  for pid in "${pids[@]}" $nginx_pid $sse_pid; do [ -n "$pid" ] && wait "$pid" 2>/dev/null; done
  if [ -n "$prefix" ] && [ -z "$weed_started" ]; then remove_prefix; fi
  [ -n "$weed_started" ] && scripts/seaweedfs.sh stop "$work/seaweedfs"
  if [ -n "$db_name" ]; then
    psql "$PG_URL" -qAtc "DROP DATABASE IF EXISTS $db_name WITH (FORCE)" >/dev/null
  fi
  if [ -n "${KEEP:-}" ] || [ "$rc" != 0 ]; then
    echo "logs and configuration kept in $work"
  else
    rm -rf "$work"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the database --------------------------------------------------------------------------
db_name="entiserve_cluster_$(date +%s)_$RANDOM"
psql "$PG_URL" -qAtc "CREATE DATABASE $db_name" >/dev/null
DB_URL="${PG_URL%/*}/$db_name"
say "PostgreSQL: a fresh database $DB_URL"

# --- the object store ----------------------------------------------------------------------
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-entiserve}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-entiserve-secret}"
export AWS_ENDPOINT_URL="${AWS_ENDPOINT_URL:-http://127.0.0.1:8333}"
export AWS_ALLOW_HTTP=true
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
BUCKET=entiserve-tests
if curl -s -o /dev/null "$AWS_ENDPOINT_URL"; then
  say "SeaweedFS: reusing the one answering on $AWS_ENDPOINT_URL"
  s3 PUT "$BUCKET" >/dev/null # creates the bucket if it is missing
else
  say "SeaweedFS: starting one (scripts/seaweedfs.sh, data in $work/seaweedfs)"
  weed_started=1
  eval "$(scripts/seaweedfs.sh start "$work/seaweedfs")"
fi
prefix="$tag"
STORAGE_URL="s3://$BUCKET/$prefix"
echo "storage: $STORAGE_URL"

# --- two servers ---------------------------------------------------------------------------
start_server() { # index
  local i=$1 name=${names[$1]} port=${PORTS[$1]}
  mkdir -p "$work/data-$name"
  ENTISERVE_ADMIN_PASSWORD="$PASSWORD" RUST_LOG="${RUST_LOG:-info}" "$BIN" serve \
    --bind "127.0.0.1:$port" --data-dir "$work/data-$name" --entities "$ROOT/entities" \
    --database-url "$DB_URL" --storage-url "$STORAGE_URL" 2>"$work/server-$name.log" &
  pids[i]=$!
}
wait_ready() { # index
  local i=$1 name=${names[$1]} port=${PORTS[$1]}
  for _ in $(seq 1 300); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ] && break
    kill -0 "${pids[i]}" 2>/dev/null || { cat "$work/server-$name.log" >&2; exit 1; }
    sleep 0.1
  done
  curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" || {
    echo "server $name is not ready:" >&2
    curl -s "http://127.0.0.1:$port/readyz" >&2
    exit 1
  }
  echo "server $name: pid ${pids[i]}, 127.0.0.1:$port, data dir $work/data-$name, log $work/server-$name.log"
}
say "two servers on one database and one store"
# Both at once, as an orchestrator starts them: one creates the schema and the admin user.
start_server 0
start_server 1
wait_ready 0
wait_ready 1

# --- nginx ---------------------------------------------------------------------------------
say "nginx on $LB, in front of both"
mkdir -p "$work/nginx"
servers=""
for port in "${PORTS[@]}"; do
  servers+="        server 127.0.0.1:$port max_fails=1 fail_timeout=10s;"$'\n'
done
user_line=""
[ "$(id -u)" = 0 ] && user_line="user root;" # workers write the temp paths under $work
awk -v dir="$work/nginx" -v port="$LB_PORT" -v servers="$servers" -v user="$user_line" '
  { gsub(/@DIR@/, dir); gsub(/@PORT@/, port); gsub(/@USER@/, user) }
  /^@SERVERS@$/ { printf "%s", servers; next }
  { print }' examples/cluster/nginx.conf.template >"$work/nginx/nginx.conf"
"$NGINX" -p "$work/nginx" -c "$work/nginx/nginx.conf" -e "$work/nginx/error.log" \
  -g 'daemon off;' &
nginx_pid=$!
for _ in $(seq 1 100); do curl -sf -o /dev/null "$LB/readyz" && break; sleep 0.1; done
curl -sf "$LB/readyz" >/dev/null || { cat "$work/nginx/error.log" >&2; exit 1; }
echo "nginx: pid $nginx_pid, config $work/nginx/nginx.conf"
for _ in 1 2; do
  curl -s -D - -o /dev/null -u "$AUTH" "$LB/users/me" | tr -d '\r' | grep -i '^x-request-id' |
    sed 's/^/  a call through the balancer: /'
done

# --- the upload ----------------------------------------------------------------------------
say "a background upload of $ROWS campaigns through the balancer"
awk -v n="$ROWS" 'BEGIN {
  print "op,name,type,description,is_active";
  for (i = 1; i <= n; i++) printf "c,cluster campaign %d,%d,row %d of the cluster example,1\n", i, i % 7, i
}' >"$work/rows.csv"
echo "file: $(du -h "$work/rows.csv" | cut -f1), $ROWS rows"
t0=$(now_ms)
rid=$(curl -sf -u "$AUTH" -F entity=campaigns -F bgrs=1 -F "csvfile=@$work/rows.csv" \
  "$LB/tools/uploader.ex.php" | jq -r .request)
echo "202 after $(secs $(($(now_ms) - t0))): request $rid"

record() { curl -sf -u "$AUTH" "$LB/bgrs/$rid"; }
# The worker that runs it writes `started (worker <pid>-<hex>)` in the details.
runner=""
for _ in $(seq 1 600); do
  w=$(curl -sf -u "$AUTH" "$LB/bgrs/$rid/details?limit=5" |
    jq -r '.[].details | capture("(started|resumed) \\(worker (?<w>[0-9]+)-").w' 2>/dev/null | head -n 1)
  for i in 0 1; do [ "$w" = "${pids[i]}" ] && runner=$i; done
  [ -n "$runner" ] && break
  sleep 0.1
done
[ -n "$runner" ] || { echo "no server started the upload" >&2; exit 1; }
other=$((1 - runner))
echo "server ${names[runner]} (pid ${pids[runner]}) runs it"

# Kill it once KILL_AT percent of the rows are done.
while :; do
  r=$(record)
  p=$(jq -r '.[0].progress' <<<"$r")
  s=$(jq -r '.[0].status_id' <<<"$r")
  [ "$s" != 2 ] && { echo "the upload ended before the kill (progress $p); try more ROWS" >&2; exit 1; }
  awk -v p="$p" -v k="$KILL_AT" 'BEGIN { exit !(p >= k) }' && break
  sleep 0.1
done
p_kill=$p
kill -KILL "${pids[runner]}"
t_kill=$(now_ms)
wait "${pids[runner]}" 2>/dev/null || true
pids[runner]=""
rm -rf "$work/data-${names[runner]}" # its disk is gone too: the data directory is scratch
say "killed server ${names[runner]} with SIGKILL at progress $p_kill and removed its data directory"

# A stream of events opened now, through the balancer, is served by the server left.
curl -sN -u "$AUTH" "$LB/bgrs/$rid/events" >"$work/events.txt" 2>/dev/null &
sse_pid=$!

# When the other server's worker claimed the request, in ms since the epoch, from the time
# stamp of its log line `background{rid=...}: background request runs`.
claimed() {
  local ts
  ts=$(sed 's/\x1b\[[0-9;]*m//g' "$work/server-${names[other]}.log" |
    grep "rid=$rid.*background request runs" | head -n 1 | cut -d' ' -f1)
  [ -n "$ts" ] && date -d "$ts" +%s%3N
}

say "polling $LB/bgrs/$rid"
base=""
moved=""
resumed=""
last=""
while :; do
  r=$(record) || { echo "GET /bgrs/$rid failed through the balancer" >&2; exit 1; }
  p=$(jq -r '.[0].progress' <<<"$r")
  s=$(jq -r '.[0].status_id' <<<"$r")
  t=$(($(now_ms) - t_kill))
  [ -z "$base" ] && base=$p
  if [ -z "$moved" ] && [ "$p" != "$base" ]; then moved=$t; fi
  if [ -z "$resumed" ] && claimed >/dev/null; then
    resumed=$(($(claimed) - t_kill))
    echo "  +$(secs "$resumed"): server ${names[other]} claims the request (the time of its log line)"
  fi
  line="progress $p, $(jq -r '.[0].status_name' <<<"$r")"
  [ "$line" != "$last" ] && echo "  +$(secs "$t"): $line"
  last=$line
  [ "$s" != 2 ] && break
  [ "$t" -gt 120000 ] && { echo "not finished 120 s after the kill" >&2; exit 1; }
  sleep 0.5
done
t_done=$(($(now_ms) - t_kill))
status=$(jq -r '.[0].status' <<<"$r")
[ "$s" = 4 ] && [ "$status" = 200 ] || { echo "ended with status_id $s, status $status" >&2; exit 1; }

say "the result, through the balancer"
curl -sf -u "$AUTH" "$LB/bgrs/$rid/result" -o "$work/result.csv"
lines=$(($(wc -l <"$work/result.csv") - 1))
ok=$(grep -c '^OK,' "$work/result.csv" || true)
echo "result: $lines rows, $ok OK (header: $(head -n 1 "$work/result.csv"))"
path=$(jq -r '.[0].result' <<<"$r")
code=$(curl -s -o /dev/null -w '%{http_code} %{size_download} bytes' -r 0-99 -u "$AUTH" "$LB/$path")
echo "GET /$path with Range: bytes=0-99: $code"
applied=$(psql "$DB_URL" -qAtc \
  "SELECT count(*) || ' ' || count(DISTINCT name) FROM campaigns WHERE name LIKE 'cluster campaign %'")
echo "campaigns in the database: $applied (rows, distinct names)"
details=$(curl -sf -u "$AUTH" "$LB/bgrs/$rid/details?limit=3" | jq -r '.[].details' | tr '\n' ';')
echo "first details: $details"
sleep 1
kill "$sse_pid" 2>/dev/null || true
wait "$sse_pid" 2>/dev/null || true
sse_pid=""
sse=$(grep -c '^event: detail' "$work/events.txt" || true)
grep -q '^event: finished' "$work/events.txt" && fin=yes || fin=no
echo "events stream opened after the kill: $sse detail events, finished event: $fin"

fail=""
[ "$lines" = "$ROWS" ] || fail+=" result rows $lines != $ROWS;"
[ "$ok" = "$ROWS" ] || fail+=" OK rows $ok != $ROWS;"
[ "$applied" = "$ROWS $ROWS" ] || fail+=" campaigns applied: $applied;"
[ "$fin" = yes ] || fail+=" no finished event;"
[ -n "$fail" ] && { echo "FAILED:$fail" >&2; exit 1; }

say "done"
echo "server ${names[runner]} killed at progress $p_kill% (it had committed $base%); server ${names[other]} took over:"
[ -n "$resumed" ] && echo "  claimed the request $(secs "$resumed") after the kill (lease 15 s)"
[ -n "$moved" ] && echo "  progress moved again $(secs "$moved") after the kill"
echo "  finished $(secs "$t_done") after the kill; every one of the $ROWS rows OK and applied once"
