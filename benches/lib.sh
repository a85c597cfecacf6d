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

# campaign_with_taken PORT: creates a campaign and its marker named "taken" on the server at
# PORT (admin:bench), and prints the campaign's id; exits when no campaign was created.
campaign_with_taken() {
  local campaign
  campaign=$(curl -sf -u admin:bench -H 'Content-Type: application/json' -d '{"name":"c"}' \
    "http://127.0.0.1:$1/v2.5/campaigns" | grep -o '"id":[0-9]*' | head -1 | cut -d: -f2)
  [ -n "$campaign" ] || { echo "no campaign was created on port $1" >&2; exit 1; }
  curl -sf -o /dev/null -u admin:bench -H 'Content-Type: application/json' \
    -d "{\"name\":\"taken\",\"campaign_id\":$campaign}" "http://127.0.0.1:$1/v2.5/markers"
  echo "$campaign"
}

# marker_rows ROWS CAMPAIGN TAG EVERY FILE: an upload of ROWS marker creates of CAMPAIGN, named
# "m TAG <i>", every EVERY-th named "taken" instead (0: none), into FILE.
marker_rows() {
  awk -v n="$1" -v c="$2" -v t="$3" -v f="$4" 'BEGIN {
    print "op;id;campaign_id;name;page";
    for (i = 0; i < n; i++) {
      name = (f > 0 && i % f == f - 1) ? "taken" : ("m " t " " i);
      printf "c;;%d;%s;%d\n", c, name, i;
    }
  }' > "$5"
}

# scratch_dir: sets `work` to a new temporary directory and `pid` to none; on exit, the server
# whose process id is then in `pid` is stopped and `work` removed.
scratch_dir() {
  work=$(mktemp -d)
  pid=""
  trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null; rm -rf "$work"' EXIT
}

# campaign_rows ROWS FILE [FAIL_EVERY]: the upload benchmarks' CSV of ROWS campaign creates, into
# FILE; with FAIL_EVERY, every FAIL_EVERY-th row's `type` is not a number, and the row fails.
campaign_rows() {
  awk -v n="$1" -v f="${3:-0}" 'BEGIN {
    print "op,name,type,description,is_active";
    for (i = 1; i <= n; i++) {
      t = (f > 0 && i % f == 0) ? "x" : i % 7;
      printf "c,campaign %d,%s,row number %d of the benchmark,1\n", i, t, i
    }
  }' > "$2"
}
