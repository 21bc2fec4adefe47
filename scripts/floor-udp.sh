#!/usr/bin/env bash
# The floor under unlimited UDP on loopback: a minimal C sender and receiver (scripts/floor/
# udp.c: a blocking send and a blocking recv in a loop, nothing else) beside iperf3 -u -b 0 and
# netblast -u -b 0 at the same datagram size (LEN, default 1400), unpinned as compare-udp.sh
# runs them, interleaved rounds; prints each one's received datagrams/s, its ratio to iperf3 in
# the same round, and each end's process CPU time per datagram received.
# What it shows on a host: how many datagrams a second the kernel delivers to a receiver that
# does nothing but receive, and how close each tool comes to it.
#
#   scripts/floor-udp.sh [ROUNDS] [SECONDS]      (defaults: 7 rounds of 3 s; LEN=1400)
set -euo pipefail
ROUNDS=${1:-7}
SECS=${2:-3}
LEN=${LEN:-1400}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
command -v cc >/dev/null || { echo "no C compiler (apt-get install build-essential)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
cc -O2 -o "$WORK/udp" scripts/floor/udp.c
P_NB=${P_NB:-15295}; P_IP=${P_IP:-15296}; P_FLOOR=${P_FLOOR:-15297}
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$NB" serve --bind 127.0.0.1 --port "$P_NB" --probe off 2>"$WORK/nb-serve.log" & SERVERS+=($!)
iperf3 -s -B 127.0.0.1 -p "$P_IP" >"$WORK/ip-serve.log" 2>&1 & SERVERS+=($!)
"$WORK/udp" sink "$P_FLOOR" >"$WORK/sink.out" & SERVERS+=($!)
sleep 0.5

# shellcheck source=scripts/cost.sh
. scripts/cost.sh
ip() { # name
  process_cost "$1" "${SERVERS[1]}" iperf3 -c 127.0.0.1 -p "$P_IP" -u -b 0 -l "$LEN" -t "$SECS" -J >"$WORK/$1.json" \
    || { cat "$WORK/$1.json" >&2; exit 1; }
  sleep 0.3
}
nb() { # name
  process_cost "$1" "${SERVERS[0]}" "$NB" run --target "127.0.0.1:$P_NB" -u -b 0 -l "$LEN" -t "$SECS" --probe off --json \
    >"$WORK/$1.json" || { echo "netblast failed" >&2; exit 1; }
  sleep 0.3
}
floor() { # name
  local lines; lines=$(wc -l <"$WORK/sink.out")
  process_cost "$1" "${SERVERS[2]}" "$WORK/udp" source "$P_FLOOR" "$SECS" "$LEN"
  # The sink prints its burst's rate 300 ms after the last datagram.
  for _ in $(seq 1 30); do
    (( $(wc -l <"$WORK/sink.out") > lines )) && break
    sleep 0.1
  done
  tail -n 1 "$WORK/sink.out" >"$WORK/$1.rate"
  sleep 0.3
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then ip "ip-$r"; nb "nb-$r"; floor "fl-$r"; else floor "fl-$r"; nb "nb-$r"; ip "ip-$r"; fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK" "$ROUNDS" "$SECS" "$LEN" <<'PY'
import json, os, statistics, sys
work, rounds, secs, length = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
med = statistics.median
R = range(1, rounds + 1)
def iperf(n):
    s = json.load(open(os.path.join(work, n + ".json")))["end"]["sum"]
    return (s["packets"] - s["lost_packets"]) / s["seconds"]
def netblast(n):
    d = json.load(open(os.path.join(work, n + ".json")))
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (n, d["errors"]))
    return d["summary"]["ways"][0]["msgs"].get("received_per_s") or 0
def floor(n):
    return float(open(os.path.join(work, n + ".rate")).read())
def cost(n, per_s):
    c, s = map(float, open(os.path.join(work, n + ".cost")).read().split())
    return c / (per_s * secs) * 1e9, s / (per_s * secs) * 1e9
i = [iperf("ip-%d" % r) for r in R]
ic = [cost("ip-%d" % r, i[r - 1]) for r in R]
print("iperf3, netblast and a minimal C pair, UDP unlimited on loopback, %s-byte datagrams, %d rounds x %g s, medians"
      % (length, rounds, secs))
print("(ratio: to iperf3 in the same round; CPU: each end's process CPU time per datagram received)")
for label, tag, f in (("iperf3", "ip", iperf), ("netblast", "nb", netblast), ("minimal C", "fl", floor)):
    v = [f("%s-%d" % (tag, r)) for r in R]
    c = [cost("%s-%d" % (tag, r), v[r - 1]) for r in R]
    print("    %-10s %6.0f k datagrams/s received  ratio %.3f   client %.0f ns (%.3f), server %.0f ns (%.3f)"
          % (label, med(v) / 1e3, med([a / b for a, b in zip(v, i)]),
             med([x[0] for x in c]), med([x[0] / y[0] for x, y in zip(c, ic)]),
             med([x[1] for x in c]), med([x[1] / y[1] for x, y in zip(c, ic)])))
PY
