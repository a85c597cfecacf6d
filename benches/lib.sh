# Pieces the benchmark scripts share; sourced by them (`. benches/lib.sh`) from the repository.

# wait_healthz BASE LOG [HINT]: waits up to 10 s for BASE/healthz to answer. If it does not,
# prints that the server did not start (with HINT) and the server's LOG, and exits.
wait_healthz() {
  for _ in $(seq 1 100); do curl -sf "$1/healthz" >/dev/null && return 0; sleep 0.1; done
  echo "the server did not start${3:+ ($3)}; its log:" >&2
  cat "$2" >&2
  exit 1
}

# entiserve_bin: leaves BIN as it is when it is set; otherwise builds the release binary (unless
# NO_BUILD=1, which takes it as it is) and sets BIN to it.
entiserve_bin() {
  BIN="${BIN:-}"
  [ -n "$BIN" ] && return 0
  [ "${NO_BUILD:-0}" = 1 ] || cargo build --release --quiet --bin entiserve
  BIN="${CARGO_TARGET_DIR:-target}/release/entiserve"
}
