#!/usr/bin/env bash
# Creates the bucket BUCKET on the SeaweedFS server at 127.0.0.1 (master on port 9333) with
# `weed shell`, WEED being the `weed` binary; LOG collects what the shell says.
#
#   scripts/weed-bucket.sh WEED BUCKET LOG
#
# `weed shell` has been seen to fail, or to hang after reading its command, when it ran before
# the filer was up, or when the master was not on port 9333 (`weed mini` moves to another port
# when one is taken: start it once the ports are free, see scripts/weed-free.sh). It runs once
# the filer answers, each call of it is bounded, and what counts is that the bucket is listed
# afterwards: up to 3 attempts.
set -euo pipefail
weed=$1
bucket=$2
log=$3
shell() { timeout 60 "$weed" shell -master=127.0.0.1:9333; }
# The shell asks the filer (HTTP on port 8888) for its configuration: it may come up after
# the S3 port.
for _ in $(seq 1 120); do
  curl -s -o /dev/null http://127.0.0.1:8888 && break
  sleep 0.5
done
for attempt in 1 2 3; do
  echo "== attempt $attempt" >>"$log"
  echo "s3.bucket.create -name $bucket" | shell >>"$log" 2>&1 || true
  if echo "s3.bucket.list" | shell 2>>"$log" | tee -a "$log" | grep -qw -- "$bucket"; then
    exit 0
  fi
  sleep 2
done
echo "the bucket $bucket could not be made; the shell said:" >&2
cat "$log" >&2
exit 1
