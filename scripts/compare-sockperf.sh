#!/usr/bin/env bash
# Runs netblast and sockperf back to back on loopback with the same pinning (client CPU 0,
# server CPU 1), interleaved, several rounds, and prints median ratios of TCP request/response
# latency: `sockperf ping-pong --tcp -m 14` (14 bytes: sockperf's smallest message, its
# header) vs `netblast run --profile latency --req-size 14 --resp-size 14`, both waiting in a
# blocking receive. sockperf reports one-way latency as round trip / 2; netblast's figures are
# halved the same way here. netblast (client and server) runs with --probe off: sockperf reads no kernel statistics
# (the probe's own cost is scripts/probe-overhead.sh's).
#
#   scripts/compare-sockperf.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds of 5 s)
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CCPU=${CCPU:-0}
SCPU=${SCPU:-1}
cd "$(dirname "$0")/.."
command -v sockperf >/dev/null || { echo "sockperf is not installed (apt-get install sockperf)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15214}
PORT_SP=${PORT_SP:-19768}
WORK=$(mktemp -d)
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
taskset -c "$SCPU" sockperf server --tcp -i 127.0.0.1 -p "$PORT_SP" >"$WORK/sp-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5

# shellcheck source=scripts/cost.sh
. scripts/cost.sh
sp() { # name
  pinned_cost "$1" taskset -c "$CCPU" sockperf ping-pong --tcp -i 127.0.0.1 -p "$PORT_SP" -t "$SECS" -m 14 >"$WORK/$1.txt" 2>&1 \
    || { cat "$WORK/$1.txt" >&2; exit 1; }
  sleep 0.3
}
nb() { # name
  pinned_cost "$1" "$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" --cpus "$CCPU" --server-cpus "$SCPU" --probe off --json \
    --profile latency --wait block --req-size 14 --resp-size 14 >"$WORK/$1.json" || { echo "netblast failed" >&2; exit 1; }
  sleep 0.3
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then sp "sp-$r"; nb "nb-$r"; else nb "nb-$r"; sp "sp-$r"; fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECS" <<'PY'
import json, os, re, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def spval(name, pattern):
    text = re.sub(r"\x1b\[[0-9;]*m", "", open(os.path.join(work, name + ".txt")).read())
    m = re.search(pattern, text)
    if not m:
        sys.exit("no %r in sockperf output %s:\n%s" % (pattern, name, text))
    return float(m.group(1))
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (name, d["errors"]))
    return d["summary"]["ways"][0]
med = statistics.median
R = range(1, rounds + 1)
s_avg = [spval("sp-%d" % r, r"avg-latency=([\d.]+)") for r in R]
s_p50 = [spval("sp-%d" % r, r"percentile 50\.000 =\s*([\d.]+)") for r in R]
s_p99 = [spval("sp-%d" % r, r"percentile 99\.000 =\s*([\d.]+)") for r in R]
n_avg = [nb("nb-%d" % r)["latency"]["mean_ns"] / 2e3 for r in R]
n_p50 = [nb("nb-%d" % r)["latency"]["p50_ns"] / 2e3 for r in R]
n_p99 = [nb("nb-%d" % r)["latency"]["p99_ns"] / 2e3 for r in R]
print("netblast vs sockperf on loopback, %d rounds x %s s, client CPU %s, server CPU %s, 14-byte TCP ping-pong, blocking, medians"
      % (rounds, secs, os.environ.get("CCPU", "0"), os.environ.get("SCPU", "1")))
for what, n, s in [("mean", n_avg, s_avg), ("p50", n_p50, s_p50), ("p99", n_p99, s_p99)]:
    print("one-way latency (RTT/2) %s: netblast %.2f us, sockperf %.2f us, ratio %.3f (target <= 1.0)"
          % (what, med(n), med(s), med([a / b for a, b in zip(n, s)])))
# Round trips each made: sockperf's count from its summary line, netblast's from its messages.
s_n = [spval("sp-%d" % r, r"SentMessages=(\d+)") for r in R]
n_n = [nb("nb-%d" % r)["msgs"]["sent"] for r in R]
def cost(name, ops):
    c, s = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return c / ops * 1e6, s / ops * 1e6
b = [cost("nb-%d" % r, n_n[r - 1]) for r in R]
o = [cost("sp-%d" % r, s_n[r - 1]) for r in R]
for side, k in (("client", 0), ("server", 1)):
    print("%s CPU per round trip (busy time of its pinned CPU): netblast %.2f us, sockperf %.2f us, ratio %.3f (target <= 1.0)"
          % (side, med([x[k] for x in b]), med([x[k] for x in o]), med([x[k] / y[k] for x, y in zip(b, o)])))
PY
