#!/usr/bin/env bash
# Fuzzes the untrusted intake of ZIP bundles for a fixed time per target and exits non-zero if
# libFuzzer finds a crash (a panic, a segfault, a stack overflow, an ASan report, an allocation
# over its limits or a hang over the timeout):
#
#   zip_intake  entiserve::uploader::bundle::inspect_bytes (the ZIP checks and decompression)
#   pdf_pages   entiserve::pdf::split (lopdf parsing and the one-page split of pages.pdf)
#
#   scripts/fuzz.sh [SECONDS]          # default 60 s per target
#   TARGETS=pdf_pages scripts/fuzz.sh 600
#   SANITIZER=none scripts/fuzz.sh     # without AddressSanitizer (faster, finds less)
#
# TIMEOUT (s, default 30) is the longest one input may run; MAX_LEN (default 65536) the
# largest input libFuzzer tries (it starts small and grows); FUZZ_ARGS adds libFuzzer flags.
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`). cargo fuzz passes nightly-only flags
# (-Zsanitizer, ...); RUSTC_BOOTSTRAP=1 lets the stable toolchain accept them. Builds go to
# fuzz/target, apart from the main target/; CARGO_BUILD_JOBS defaults to 1. The working corpus
# is fuzz/corpus/<target>/ (not committed), seeded from fuzz/seeds/<target>/ (committed,
# written by fuzz/gen_seeds.py); findings land in fuzz/artifacts/<target>/.
set -euo pipefail
cd "$(dirname "$0")/.."

SECS="${1:-60}"
TARGETS="${TARGETS:-zip_intake pdf_pages}"
SANITIZER="${SANITIZER:-address}"
TIMEOUT="${TIMEOUT:-30}"
MAX_LEN="${MAX_LEN:-65536}"
[[ "$SECS" =~ ^[0-9]+$ && "$SECS" -gt 0 ]] || { echo "usage: $0 [SECONDS]" >&2; exit 2; }
command -v cargo-fuzz >/dev/null || { echo "cargo-fuzz is missing: cargo install cargo-fuzz" >&2; exit 2; }

export RUSTC_BOOTSTRAP=1
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-1}"
export CARGO_TARGET_DIR="$PWD/fuzz/target"
fuzz=(cargo fuzz)
opts=(--fuzz-dir fuzz --sanitizer "$SANITIZER")

echo "building the fuzz targets (sanitizer: $SANITIZER, jobs: $CARGO_BUILD_JOBS)" >&2
"${fuzz[@]}" build "${opts[@]}"

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
failed=()
summary=()
for t in $TARGETS; do
  corpus="fuzz/corpus/$t"
  mkdir -p "$corpus" "fuzz/artifacts/$t"
  cp -n "fuzz/seeds/$t/"* "$corpus/" 2>/dev/null || true
  dict=()
  [ -f "fuzz/$t.dict" ] && dict=("-dict=fuzz/$t.dict")
  echo "fuzzing $t for $SECS s (corpus: $(ls "$corpus" | wc -l) inputs)" >&2
  set +e
  "${fuzz[@]}" run "${opts[@]}" "$t" "$corpus" -- \
    -max_total_time="$SECS" -timeout="$TIMEOUT" -max_len="$MAX_LEN" -print_final_stats=1 "${dict[@]}" \
    ${FUZZ_ARGS:-} 2>&1 | tee "$logs/$t.log" | grep -E '^(#[0-9]+[[:space:]]+(INITED|DONE)|==|INFO: (Loaded|seed)|.*(panicked|ERROR|SUMMARY|Test unit written|deadly signal|out-of-memory|timeout))' >&2
  rc=${PIPESTATUS[0]}
  set -e
  execs=$(awk '/stat::number_of_executed_units/ {print $2}' "$logs/$t.log" | tail -n 1)
  cov=$(grep -oE 'cov: [0-9]+' "$logs/$t.log" | tail -n 1 | awk '{print $2}')
  if [ "$rc" -ne 0 ]; then
    artifact=$(grep -oE 'Test unit written to [^ ]+' "$logs/$t.log" | tail -n 1 | awk '{print $5}')
    failed+=("$t")
    summary+=("$t: CRASH after ${execs:-?} executions; reproducer: ${artifact:-see the log}")
    echo "---- $t: the last lines of libFuzzer's output" >&2
    tail -n 60 "$logs/$t.log" >&2
  else
    summary+=("$t: $SECS s, ${execs:-?} executions, coverage ${cov:-?} edges, no crash")
  fi
done

echo
printf '%s\n' "${summary[@]}"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "crashes in: ${failed[*]} (reproduce: RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz <target> <artifact>)"
  exit 1
fi
