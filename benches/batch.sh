#!/usr/bin/env bash
# Batch benchmark: a synchronous batch of 10,000 creates (`POST /campaigns?bgrs=false`) and a
# background batch of 100,000 creates (POST to finished), against the real server over HTTP,
# with the `sqlite3` CLI running the same 10,000 INSERTs in one transaction as the same-run
# baseline. Prints medians, the ratio to the baseline and the targets (10,000 synchronous
# creates in 40 ms on SQLite and 60 ms on PostgreSQL; 100,000 background creates in 600 ms and
# 1,000 ms). See examples/bench_batch.rs for every option.
#
#   benches/batch.sh                                                   # SQLite
#   PG_URL=postgres://postgres@127.0.0.1:5432/postgres benches/batch.sh   # and PostgreSQL
#   PG_ONLY=1 PG_URL=... benches/batch.sh                              # PostgreSQL alone
#   BIN=/path/to/other/entiserve benches/batch.sh                      # another binary
#   FAIL_EVERY=100 benches/batch.sh     # every 100th item (1%) refused; the rest must be created
set -euo pipefail
cd "$(dirname "$0")/.."
args=(--sync-runs "${SYNC_RUNS:-11}" --bg-runs "${BG_RUNS:-5}")
[ -n "${PG_URL:-}" ] && args+=(--database-url "$PG_URL") || args+=(--backend sqlite)
[ -n "${PG_ONLY:-}" ] && args+=(--backend postgres --no-baseline)
[ -n "${FAIL_EVERY:-}" ] && args+=(--fail-every "$FAIL_EVERY")
if [ -n "${BIN:-}" ]; then
  cargo build --release --quiet --example bench_batch
  args+=(--no-build --server-bin "$BIN")
fi
exec cargo run --release --quiet --example bench_batch -- "${args[@]}"
