#!/usr/bin/env bash
# What a request costs the server in CPU time, kernel included: wrk (2 threads, 32
# connections, on the same machine) runs against `/healthz` and against GET by id with HTTP
# Basic (SQLite, one object), and each thread's `/proc/<pid>/task/<tid>/schedstat` and
# context switches are read before and after. Prints, per endpoint and run, the requests a
# second, the server's CPU a request (us), the time its threads waited for a core a request
# (us), and the preemptions and voluntary switches a request; then the medians and the ratio
# of the two endpoints' CPU a request. Where `benches/http_path.sh` says how far apart the two
# rates are, this says how much of it is the server's own time.
#
#   benches/http_cpu.sh                      # builds the binary
#   RUNS=5 DURATION=5s BIN=/path/entiserve benches/http_cpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
. benches/lib.sh
RUNS="${RUNS:-3}"
DURATION="${DURATION:-5s}"
PORT="${PORT:-18186}"
command -v wrk >/dev/null || { echo "install wrk (apt-get install wrk)" >&2; exit 1; }
entiserve_bin
scratch_dir
base="http://127.0.0.1:$PORT"
ENTISERVE_ADMIN_PASSWORD=bench RUST_LOG=warn "$BIN" serve --bind "127.0.0.1:$PORT" \
  --data-dir "$work/data" --entities entities 2>"$work/server.log" &
pid=$!
wait_healthz "$base" "$work/server.log"
id=$(curl -sf -u admin:bench -X POST "$base/campaigns" -H 'content-type: application/json' \
  -d '{"name":"http cpu"}' | sed -E 's/.*"id": *([0-9]+).*/\1/')
auth="Authorization: Basic YWRtaW46YmVuY2g="

# threads: one line per thread of the server: ran ns, waited ns, voluntary and involuntary
# switches.
threads() {
  for t in /proc/"$pid"/task/*; do
    read -r ran waited _ <"$t/schedstat"
    awk -v r="$ran" -v w="$waited" '/^voluntary_ctxt/ {v = $2} /^nonvoluntary_ctxt/ {n = $2}
      END {print r, w, v, n}' "$t/status"
  done | awk '{r += $1; w += $2; v += $3; n += $4} END {print r, w, v, n}'
}

# measure URL: one run of wrk on URL; prints req/s, CPU us a request, waited us a request,
# preemptions and voluntary switches a request.
measure() {
  local before after out
  wrk -t2 -c32 -d1s -H "$auth" "$1" >/dev/null
  before=$(threads)
  out=$(wrk -t2 -c32 -d"$DURATION" -H "$auth" "$1")
  after=$(threads)
  if echo "$out" | grep -q Non-2xx; then echo "$1: non-2xx answers" >&2; exit 1; fi
  awk -v b="$before" -v a="$after" -v out="$out" 'BEGIN {
    split(b, x, " "); split(a, y, " ");
    n = split(out, lines, "\n");
    for (i = 1; i <= n; i++) {
      if (lines[i] ~ /requests in/) { split(lines[i], f, " "); reqs = f[1] }
      if (lines[i] ~ /^Requests\/sec/) { split(lines[i], f, " "); rate = f[2] }
    }
    printf "%d %.2f %.2f %.3f %.3f\n", rate, (y[1] - x[1]) / 1e3 / reqs,
      (y[2] - x[2]) / 1e3 / reqs, (y[4] - x[4]) / reqs, (y[3] - x[3]) / reqs
  }'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

names=("GET /healthz" "GET /campaigns/<id>, Basic")
urls=("$base/healthz" "$base/campaigns/$id")
: >"$work/runs"
for run in $(seq 1 "$RUNS"); do
  for i in 0 1; do
    r=$(measure "${urls[$i]}")
    echo "$i $r" >>"$work/runs"
    echo "run $run, ${names[$i]}: req/s, CPU us/req, waited us/req, preempted/req, slept/req: $r"
  done
done
echo
echo "| route | req/s | server CPU a request (us) | waited for a core (us) | preemptions a request | voluntary switches a request |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for i in 0 1; do
  cols=()
  for c in 2 3 4 5 6; do
    cols+=("$(awk -v i="$i" -v c="$c" '$1 == i {print $c}' "$work/runs" | median)")
  done
  echo "| ${names[$i]} | ${cols[0]} | ${cols[1]} | ${cols[2]} | ${cols[3]} | ${cols[4]} |"
  cpu[$i]=${cols[1]}
done
echo
awk -v a="${cpu[1]}" -v b="${cpu[0]}" \
  'BEGIN {printf "GET by id costs the server %.2f times the CPU of /healthz a request\n", a / b}'
