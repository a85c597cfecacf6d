#!/usr/bin/env bash
# Checks the OpenAPI document a live server serves with the tools its users have:
#  a. Redocly CLI (recommended rules, redocly.yaml) and Spectral (.spectral.yaml, spectral:oas)
#     lint /openapi.json of a server on the shipped entities; any error or warning fails;
#  b. the same lint on a server whose entities also hold clients/lint/entities/gadgets.yaml
#     (one field of every type);
#  c. a TypeScript client (openapi-typescript + openapi-fetch, clients/typescript) is generated,
#     type-checked under --strict (a created object's `id` goes straight into GET /campaigns/{id},
#     which needs ids and required fields typed non-null; its `@ts-expect-error` line must be
#     needed: without it tsc must fail) and run against the server;
#  d. a Python client (openapi-python-client, in the venv target/clients-venv) is generated,
#     installed, imported module by module and run against the server (clients/python/smoke.py).
# Builds nothing: BIN (default target/debug/entiserve) is the server. Needs node/npm and python3;
# npm and PyPI packages come from the lock files. Every step runs; the script exits 1 naming the
# steps that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
BIN="${BIN:-target/debug/entiserve}"
PASSWORD="clients-check-pass"
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

[ -x "$BIN" ] || { echo "no server binary at $BIN (set BIN, or cargo build first)" >&2; exit 1; }
for tool in node npm python3 curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed" >&2; exit 1; }
done

tmp=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$tmp"
}
trap cleanup EXIT

# Prints a command, then runs it.
run() {
  echo "+ $*" >&2
  "$@"
}

failed=()
# Runs a step (a function and its arguments) with errexit; a failure is recorded, and the next
# step runs.
step() {
  local name=$1
  shift
  echo
  echo "== $name"
  set +e
  (set -e; "$@")
  local rc=$?
  set -e
  if [ "$rc" -ne 0 ]; then
    echo "-- FAILED: $name"
    failed+=("$name")
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts a server on the entities in $2, on a temp data dir; its URL goes to the variable named $1.
start_server() {
  local var=$1 entities=$2 port
  port=$(free_port)
  echo "+ $BIN serve --bind 127.0.0.1:$port --entities $entities (log: $tmp/server-$port.log)" >&2
  ENTISERVE_ADMIN_PASSWORD="$PASSWORD" RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$port" \
    --data-dir "$tmp/data-$port" --entities "$entities" 2>"$tmp/server-$port.log" &
  pids+=($!)
  for _ in $(seq 1 100); do
    if curl -sf "http://127.0.0.1:$port/healthz" >/dev/null; then
      printf -v "$var" 'http://127.0.0.1:%s' "$port"
      return 0
    fi
    sleep 0.1
  done
  echo "the server on port $port did not answer /healthz:" >&2
  cat "$tmp/server-$port.log" >&2
  exit 1
}

# Prints a linter's JSON report ($2, tool $1) a problem a line, then the count of each rule;
# fails on any problem at warning level or above.
report() {
  python3 - "$1" "$2" <<'PY'
import collections, json, sys
tool, path = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
if tool == "redocly":
    found = [(p["severity"], p["ruleId"], p["location"][0]["pointer"], p["message"]) for p in doc["problems"]]
else:
    levels = ["error", "warn", "info", "hint"]
    found = [(levels[p["severity"]], p["code"], ".".join(map(str, p["path"])), p["message"]) for p in doc]
for severity, rule, where, message in found:
    print(f"{severity:5} {rule:32} {where}  {message}")
counts = collections.Counter((severity, rule) for severity, rule, _, _ in found)
print(f"{tool}: {len(found)} problems")
for (severity, rule), n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"  {n:5}  {severity:5} {rule}")
sys.exit(1 if any(severity in ("error", "warn") for severity, _, _, _ in found) else 0)
PY
}

lint_tools() {
  run npm ci --prefix clients/lint --no-audit --no-fund
}

redocly() {
  local url=$1 out=$tmp/redocly-$RANDOM.json rc=0 config=(--extends recommended)
  [ -f redocly.yaml ] && config=(--config redocly.yaml)
  run clients/lint/node_modules/.bin/redocly lint "$url" "${config[@]}" --format json \
    --max-problems 100000 >"$out" || rc=$?
  report redocly "$out"
  [ "$rc" -eq 0 ]
}

spectral() {
  local url=$1 out=$tmp/spectral-$RANDOM.json rc=0
  run clients/lint/node_modules/.bin/spectral lint "$url" --ruleset .spectral.yaml \
    --fail-severity=warn --format json --output "$out" || rc=$?
  report spectral "$out"
  [ "$rc" -eq 0 ]
}

ts_generate() {
  cd clients/typescript
  run npm ci --no-audit --no-fund
  OPENAPI_URL="$url/openapi.json" run npm run gen
}

ts_check() {
  cd clients/typescript
  run npm run check
}

# A copy of the sources without the `@ts-expect-error` line must fail to compile, in that file.
ts_directive_needed() {
  local copy=$tmp/ts-without-directive out
  mkdir -p "$copy/src"
  cp clients/typescript/package.json clients/typescript/tsconfig.json "$copy/"
  cp clients/typescript/src/*.ts "$copy/src/"
  ln -s "$root/clients/typescript/node_modules" "$copy/node_modules"
  grep -v '@ts-expect-error' clients/typescript/src/compile_fail.ts >"$copy/src/compile_fail.ts"
  echo "+ tsc --noEmit (src/compile_fail.ts without its @ts-expect-error line)" >&2
  if out=$(cd "$copy" && node_modules/.bin/tsc --noEmit 2>&1); then
    echo "tsc accepted a batch item with a wrong field type: batch items are not typed" >&2
    return 1
  fi
  echo "$out"
  if ! grep -q '^src/compile_fail\.ts(' <<<"$out"; then
    echo "tsc failed, but not on src/compile_fail.ts" >&2
    return 1
  fi
}

ts_run() {
  cd clients/typescript
  BASE_URL="$url" ADMIN_PASSWORD="$PASSWORD" run npm start
}

python_client() {
  local venv=target/clients-venv generated=$tmp/python-client
  [ -x "$venv/bin/python" ] || run python3 -m venv "$venv"
  run "$venv/bin/pip" install --quiet -r clients/python/requirements.txt
  # The generator formats its output with the venv's ruff.
  export PATH="$root/$venv/bin:$PATH"
  run openapi-python-client generate --url "$url/openapi.json" --config clients/python/config.yaml \
    --meta setup --output-path "$generated"
  run "$venv/bin/pip" install --quiet --no-build-isolation --force-reinstall "$generated"
  BASE_URL="$url" ADMIN_PASSWORD="$PASSWORD" run "$venv/bin/python" -u clients/python/smoke.py
}

url="" extra_url=""
start_server url "$root/entities"
extra_entities=$tmp/entities-extra
mkdir -p "$extra_entities"
cp entities/*.yaml clients/lint/entities/*.yaml "$extra_entities/"
start_server extra_url "$extra_entities"

step "lint tools (npm ci)" lint_tools
step "a. Redocly: shipped entities" redocly "$url/openapi.json"
step "a. Spectral: shipped entities" spectral "$url/openapi.json"
step "b. Redocly: with gadgets.yaml" redocly "$extra_url/openapi.json"
step "b. Spectral: with gadgets.yaml" spectral "$extra_url/openapi.json"
step "c. TypeScript: npm ci, generate" ts_generate
step "c. TypeScript: type check" ts_check
step "c. TypeScript: compile_fail.ts fails without its directive" ts_directive_needed
step "c. TypeScript: run against the server" ts_run
step "d. Python: generate, install, import, run against the server" python_client

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "api-clients: ${#failed[@]} steps failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "api-clients: all steps passed"
