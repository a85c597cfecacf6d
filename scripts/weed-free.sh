#!/usr/bin/env bash
# Waits (up to 30 s) until nothing listens on the ports a SeaweedFS `weed mini` on 127.0.0.1
# takes (master 9333, filer 8888, S3 8333), so that one started next gets them: when one is
# taken it moves to another port, where `weed shell -master=127.0.0.1:9333` does not find it.
set -euo pipefail
listening() { (echo >"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
for _ in $(seq 1 300); do
  if ! listening 9333 && ! listening 8888 && ! listening 8333; then
    exit 0
  fi
  sleep 0.1
done
echo "a SeaweedFS port (9333, 8888 or 8333) on 127.0.0.1 is still taken" >&2
exit 1
