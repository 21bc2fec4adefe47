#!/usr/bin/env bash
# The floor under request/response and connections per second on loopback: a minimal C client
# and server (scripts/floor/rr.c: blocking send and recv in a loop, nothing else) beside
# netperf and netblast with the same pinning (client CPU 0, server CPU 1) and the same
# exchange, interleaved rounds; prints each one's median, its ratio to netperf in the same
# round, and each end's CPU per operation (busy time of its pinned CPU over the middle of the
# run, scripts/cost.sh's window_cost: start-up is charged to no one).
#   - request/response: 1-byte request and response on one connection (netperf TCP_RR,
#     netblast --profile latency --wait block);
#   - connections: connect, 1-byte request and response, the server closes first (netperf
#     TCP_CRR, netblast --profile cps -P 1 --close server).
# What it shows on a host: how far the kernel's own path (system calls, loopback, the
# scheduler's wake-ups) sets both tools' rate; a tool at the minimal program's figure has
# nothing left to remove in user space. netblast runs with --probe off on both ends.
#
#   scripts/floor-rr.sh [ROUNDS] [SECONDS]      (defaults: 7 rounds of 3 s)
set -euo pipefail
ROUNDS=${1:-7}
SECS=${2:-3}
CCPU=${CCPU:-0}
SCPU=${SCPU:-1}
cd "$(dirname "$0")/.."
command -v netperf >/dev/null || { echo "netperf is not installed (scripts/compare-netperf.sh installs it)" >&2; exit 2; }
command -v cc >/dev/null || { echo "no C compiler (apt-get install build-essential)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
cc -O2 -o "$WORK/rr" scripts/floor/rr.c
P_NB=${P_NB:-15290}; P_NP=${P_NP:-15291}; P_RR=${P_RR:-15292}; P_CRR=${P_CRR:-15293}
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$NB" serve --bind 127.0.0.1 --port "$P_NB" --probe off 2>"$WORK/nb-serve.log" & SERVERS+=($!)
netserver -D -L 127.0.0.1 -p "$P_NP" >"$WORK/np-serve.log" 2>&1 & SERVERS+=($!)
taskset -c "$SCPU" "$WORK/rr" serve "$P_RR" & SERVERS+=($!)
taskset -c "$SCPU" "$WORK/rr" serve "$P_CRR" crr & SERVERS+=($!)
sleep 0.5

# shellcheck source=scripts/cost.sh
. scripts/cost.sh
np() { # name test
  window_cost "$1" netperf -H 127.0.0.1 -p "$P_NP" -t "$2" -l "$SECS" -T "$CCPU,$SCPU" -P 0 -- -r 1,1 -o THROUGHPUT \
    >"$WORK/$1.txt" 2>&1 || { cat "$WORK/$1.txt" >&2; exit 1; }
  sleep 0.3
}
nb() { # name args...
  local name=$1; shift
  window_cost "$name" "$NB" run --target "127.0.0.1:$P_NB" -t "$SECS" --cpus "$CCPU" --server-cpus "$SCPU" --probe off --json "$@" \
    >"$WORK/$name.json" || { echo "netblast $* failed" >&2; exit 1; }
  sleep 0.3
}
floor() { # name mode port
  window_cost "$1" taskset -c "$CCPU" "$WORK/rr" "$2" "$3" "$SECS" >"$WORK/$1.txt" || { echo "rr $2 failed" >&2; exit 1; }
  sleep 0.3
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    np "nrr-$r" TCP_RR; nb "brr-$r" --profile latency --wait block; floor "frr-$r" rr "$P_RR"
    np "ncrr-$r" TCP_CRR; nb "bcrr-$r" --profile cps -P 1 --close server; floor "fcrr-$r" crr "$P_CRR"
  else
    floor "fcrr-$r" crr "$P_CRR"; nb "bcrr-$r" --profile cps -P 1 --close server; np "ncrr-$r" TCP_CRR
    floor "frr-$r" rr "$P_RR"; nb "brr-$r" --profile latency --wait block; np "nrr-$r" TCP_RR
  fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECS" <<'PY'
import json, os, re, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
med = statistics.median
R = range(1, rounds + 1)
def last_number(name):
    text = open(os.path.join(work, name + ".txt")).read()
    nums = [l.strip() for l in text.splitlines() if re.fullmatch(r"\s*[\d.]+\s*", l)]
    if not nums:
        sys.exit("no figure in %s:\n%s" % (name, text))
    return float(nums[-1])
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (name, d["errors"]))
    return d["summary"]["ways"][0]["msgs"]["sent_per_s"]
def cost(name, rate):
    c, s, window = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return c / (rate * window) * 1e6, s / (rate * window) * 1e6
print("netblast and a minimal C program against netperf on loopback, %d rounds x %g s, client CPU %s, server CPU %s, medians"
      % (rounds, secs, os.environ.get("CCPU", "0"), os.environ.get("SCPU", "1")))
print("(ratio: to netperf in the same round; CPU: busy time of each end's pinned CPU per operation, over the middle of each run)")
for title, pre, unit in (("1-byte request/response, blocking (TCP_RR)", "rr", "transaction"),
                         ("connect, 1-byte request/response, server closes (TCP_CRR)", "crr", "connection")):
    n = [last_number("n%s-%d" % (pre, r)) for r in R]
    rows = (("netperf", n, "n" + pre),
            ("netblast", [nb("b%s-%d" % (pre, r)) for r in R], "b" + pre),
            ("minimal C", [last_number("f%s-%d" % (pre, r)) for r in R], "f" + pre))
    print(title + ":")
    nc = [cost("n%s-%d" % (pre, r), n[r - 1]) for r in R]
    for label, v, tag in rows:
        c = [cost("%s-%d" % (tag, r), v[r - 1]) for r in R]
        print("    %-10s %8.0f /s  ratio %.3f   CPU per %s: client %.2f us (%.3f), server %.2f us (%.3f)"
              % (label, med(v), med([a / b for a, b in zip(v, n)]), unit,
                 med([x[0] for x in c]), med([x[0] / y[0] for x, y in zip(c, nc)]),
                 med([x[1] for x in c]), med([x[1] / y[1] for x, y in zip(c, nc)])))
PY
