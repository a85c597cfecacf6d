#!/usr/bin/env bash
# Instructions a SQLite upload costs the server, counted by valgrind's callgrind: the same
# count for the same binary and file whatever else the machine is doing, so a change can be
# judged on a busy machine where the times of `benches/uploader.sh` move by 15% from run to run.
#
# Each binary serves on a fresh data directory under callgrind, with instrumentation off. A 10-row
# upload warms it (the credential cache, the statements); instrumentation is switched on for the
# upload of ROWS create rows (the same file as `benches/uploader.sh` makes) and off after it.
# Prints the instructions per row of each binary and, with COMPARE_BIN, their ratio.
# THREADS=1 counts each thread apart (callgrind's --separate-threads) and also prints, to
# stderr, each busy thread's instructions per row with what it does (the preparing stage, the
# reader, the runtime's workers running the inserts): the longest thread bounds the upload's
# time.
# TAKEN_EVERY=N uploads marker rows instead, every N-th naming the key (campaign, name) of a
# marker that already exists, as `benches/conflicts.sh` does: the path of creates that fail in
# the database, where a chunk's inserts run again passing over the taken keys.
#
#   benches/upload_instructions.sh                          # builds, 50,000 rows
#   ROWS=20000 BIN=/path/entiserve COMPARE_BIN=/path/older/entiserve benches/upload_instructions.sh
#   ROWS=20000 TAKEN_EVERY=100 benches/upload_instructions.sh   # 1 row in 100 breaks a key
#   THREADS=1 BIN=/path/entiserve benches/upload_instructions.sh # and each thread's share
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
ROWS="${ROWS:-50000}"
PORT="${PORT:-18193}"
TAKEN_EVERY="${TAKEN_EVERY:-0}"
THREADS="${THREADS:-}"
command -v valgrind >/dev/null || { echo "install valgrind (apt-get install valgrind)" >&2; exit 1; }
entiserve_bin
COMPARE_BIN="${COMPARE_BIN:-}"
scratch_dir

campaign_rows 10 "$work/warm.csv"
campaign_rows "$ROWS" "$work/rows.csv"

entity=campaigns
ok_rows="$ROWS"
if [ "$TAKEN_EVERY" -gt 0 ]; then
  entity=markers
  ok_rows=$((ROWS - ROWS / TAKEN_EVERY))
fi

upload() { # file
  curl -sf -u admin:bench -F "entity=$entity" -F "csvfile=@$1" \
    "http://127.0.0.1:$PORT/tools/uploader.ex.php" -o "$work/result.csv"
}

# With TAKEN_EVERY, a campaign and its marker "taken", then the files of its markers.
taken_keys() {
  local c
  c=$(campaign_with_taken "$PORT") && [ -n "$c" ] || exit 1
  marker_rows 200 "$c" warm "$TAKEN_EVERY" "$work/warm.csv"
  marker_rows "$ROWS" "$c" rows "$TAKEN_EVERY" "$work/rows.csv"
}

count() { # binary -> instructions of the upload
  local out="$work/callgrind.out"
  local sep=()
  [ -n "$THREADS" ] && sep=(--separate-threads=yes)
  rm -rf "$work/data" "$out" "$out"-*
  ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn valgrind --tool=callgrind "${sep[@]}" --instr-atstart=no \
    --callgrind-out-file="$out" "$1" serve --bind "127.0.0.1:$PORT" --data-dir "$work/data" \
    --entities entities 2>"$work/server.log" &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null && break; sleep 0.2; done
  [ "$TAKEN_EVERY" -gt 0 ] && taken_keys
  upload "$work/warm.csv"
  callgrind_control -i on "$pid" >/dev/null
  upload "$work/rows.csv"
  callgrind_control -i off "$pid" >/dev/null
  local ok
  ok=$(grep -c '^OK[,;]' "$work/result.csv" || true)
  [ "$ok" = "$ok_rows" ] || { echo "$1: $ok of $ROWS rows OK, not $ok_rows" >&2; exit 1; }
  kill "$pid"
  wait "$pid" 2>/dev/null || true
  pid=""
  if [ -z "$THREADS" ]; then
    total_of "$out"
    return
  fi
  local f n sum=0
  for f in "$out"-*; do
    n=$(total_of "$f")
    n=${n//[^0-9]/} # a thread that ran nothing counted shows `.`
    n=${n:-0}
    sum=$((sum + n))
    # Threads with less than 1% of the upload's instructions are left out.
    [ "$n" -gt $((ROWS * 160)) ] && echo "  thread ${f##*-}: $((n / ROWS)) a row, $(role_of "$f")" >&2
  done
  echo "$sum"
}

total_of() { # callgrind output -> its instructions
  callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
}

role_of() { # a thread's callgrind output -> what the thread does
  local fns role check=""
  fns=$(callgrind_annotate --inclusive=yes "$1" 2>/dev/null)
  if grep -q 'uploader::stage::Stage::spawn' <<<"$fns"; then
    role="the preparing stage"
  elif grep -q 'csv::reader::Reader' <<<"$fns"; then
    role="the reader"
  elif grep -q 'inserts::insert_many' <<<"$fns"; then
    role="a runtime worker (the runner: the inserts, the result lines)"
  fi
  # The whole-file check runs before the rows on a blocking thread, which may serve later as
  # the stage or the reader.
  grep -q 'uploader::validate::check' <<<"$fns" && check="the whole-file check before the rows"
  if [ -n "${role:-}" ] && [ -n "$check" ]; then
    echo "$role, and $check"
  else
    echo "${role:-${check:-other work}}"
  fi
}

a=$(count "$BIN")
echo "$BIN: $a instructions for $ROWS rows, $((a / ROWS)) a row"
if [ -n "$COMPARE_BIN" ]; then
  b=$(count "$COMPARE_BIN")
  echo "$COMPARE_BIN: $b instructions for $ROWS rows, $((b / ROWS)) a row"
  awk -v a="$a" -v b="$b" 'BEGIN { printf "ratio (BIN / COMPARE_BIN): %.3f\n", a / b }'
fi
