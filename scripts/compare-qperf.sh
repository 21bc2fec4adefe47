#!/usr/bin/env bash
# Runs netblast and qperf back to back on loopback with the same pinning (client CPU 0, server
# CPU 1), interleaved, several rounds, and prints median ratios:
#   - message rate, 1 flow of 1-byte TCP messages, against `qperf -m 1 tcp_bw`, in two modes:
#       pps-8core as shipped (one send, one segment and one read per message: TCP_NODELAY,
#       batch 1, recv each): application messages/s AND wire packets/s, both ways, from the
#       loopback interface's packet counters around each run (qperf's too);
#       batched (sendmmsg of 64, reads of what has arrived): messages/s only, the receiver's
#       work differs from qperf's (it reads many messages per call), said so;
#   - latency: `qperf tcp_lat` (one-way = round trip / 2) vs netblast rr, one-way = mean RTT / 2
# plus netblast's UDP datagrams/s with one flow per CPU.
# netblast (client and server) runs with --probe off: qperf reads no kernel statistics. The
# message-rate clients are the exception (--probe tcpinfo): their segments and wire packets
# are the kernel's counters, read once per interval (without them the figures are absent).
#
#   scripts/compare-qperf.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds of 5 s)
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CCPU=${CCPU:-0}
SCPU=${SCPU:-1}
cd "$(dirname "$0")/.."
command -v qperf >/dev/null || { echo "qperf is not installed (apt-get install qperf)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15211}
PORT_QP=${PORT_QP:-19766}
WORK=$(mktemp -d)
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
taskset -c "$SCPU" qperf -lp "$PORT_QP" >"$WORK/qp-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5

LO=/sys/class/net/lo/statistics/tx_packets
# shellcheck source=scripts/cost.sh
. scripts/cost.sh
qp() { # name test [options...]
  local name=$1 test=$2; shift 2
  local a; a=$(cat "$LO")
  pinned_cost "$name" taskset -c "$CCPU" qperf -lp "$PORT_QP" -t "$SECS" -v "$@" 127.0.0.1 "$test" >"$WORK/$name.txt" 2>&1 || { cat "$WORK/$name.txt" >&2; exit 1; }
  echo $(( $(cat "$LO") - a )) >"$WORK/$name.lo"
  sleep 0.3
}
nb() { # name args...   (NB_PROBE: the client's --probe, default off)
  local name=$1; shift
  local a; a=$(cat "$LO")
  pinned_cost "$name" "$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" --cpus "$CCPU" --server-cpus "$SCPU" --probe "${NB_PROBE:-off}" --json "$@" >"$WORK/$name.json" || { echo "netblast $* failed" >&2; exit 1; }
  echo $(( $(cat "$LO") - a )) >"$WORK/$name.lo"
  sleep 0.3
}

for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    qp "qbw-$r" tcp_bw -m 1; NB_PROBE=tcpinfo nb "nbw-$r" --profile pps-8core --flows 1
    NB_PROBE=tcpinfo nb "nbb-$r" --profile pps-8core --flows 1 --batch 64 --recv batch --eor false
    qp "qlat-$r" tcp_lat; nb "nlat-$r" --profile latency; nb "nlatb-$r" --profile latency --wait block
  else
    NB_PROBE=tcpinfo nb "nbb-$r" --profile pps-8core --flows 1 --batch 64 --recv batch --eor false
    NB_PROBE=tcpinfo nb "nbw-$r" --profile pps-8core --flows 1; qp "qbw-$r" tcp_bw -m 1
    nb "nlatb-$r" --profile latency --wait block; nb "nlat-$r" --profile latency; qp "qlat-$r" tcp_lat
  fi
  echo "round $r/$ROUNDS done" >&2
done
# UDP: one flow per CPU, both CPUs (client and server share them on loopback).
"$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" --profile pps-udp --probe off --json >"$WORK/udp.json"

python3 - "$WORK" "$ROUNDS" "$SECS" <<'EOF'
import json, os, re, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def qval(name, key):
    text = open(os.path.join(work, name + ".txt")).read()
    m = re.search(r"^\s*%s\s*=\s*([\d.,]+)\s*(\S*)" % key, text, re.M)
    if not m:
        sys.exit("no %s in qperf output %s:\n%s" % (key, name, text))
    v = float(m.group(1).replace(",", ""))
    return v * {"K/sec": 1e3, "M/sec": 1e6, "/sec": 1, "us": 1e-6, "ms": 1e-3, "ns": 1e-9, "sec": 1}.get(m.group(2), 1)
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (name, d["errors"]))
    return d["summary"]["ways"][0]
med = statistics.median
R = range(1, rounds + 1)
def lo(name):
    return int(open(os.path.join(work, name + ".lo")).read())
q_rate = [qval("qbw-%d" % r, "msg_rate") for r in R]
q_pkts = [lo("qbw-%d" % r) / float(secs) for r in R]
n_rate = [nb("nbw-%d" % r)["msgs"]["sent_per_s"] for r in R]
n_wire = [nb("nbw-%d" % r)["msgs"]["tcp"]["wire_packets_per_s"] for r in R]
n_lo = [lo("nbw-%d" % r) / nb("nbw-%d" % r)["sender"]["seconds"] for r in R]
n_count = [nb("nbw-%d" % r)["msgs"]["tcp"]["wire_packets"] / lo("nbw-%d" % r) for r in R]
b_rate = [nb("nbb-%d" % r)["msgs"]["sent_per_s"] for r in R]
b_segs = [nb("nbb-%d" % r)["msgs"]["tcp"]["segs_out_per_s"] for r in R]
q_lat = [qval("qlat-%d" % r, "latency") for r in R]
n_lat = [nb("nlat-%d" % r)["latency"]["mean_ns"] / 2e9 for r in R]
n_latb = [nb("nlatb-%d" % r)["latency"]["mean_ns"] / 2e9 for r in R]
n_p50 = [nb("nlat-%d" % r)["latency"]["p50_ns"] / 2e9 for r in R]
print("netblast vs qperf on loopback, %d rounds x %s s, client CPU %s, server CPU %s, medians"
      % (rounds, secs, os.environ.get("CCPU", "0"), os.environ.get("SCPU", "1")))
print("1 flow of 1-byte TCP messages, pps-8core as shipped (one send, segment and read per message):")
print("    wire packets/s (loopback counter, both ways): netblast %.0f k/s, qperf %.0f k/s, ratio %.3f (target >= 1.0)"
      % (med(n_lo) / 1e3, med(q_pkts) / 1e3, med([a / b for a, b in zip(n_lo, q_pkts)])))
print("    netblast's own wire packets/s (segments out + in): %.0f k/s, %.3f of the loopback counter (target within 5%%)"
      % (med(n_wire) / 1e3, med(n_count)))
print("    pps-8core application messages/s: netblast %.3f M/s, qperf %.3f M/s, ratio %.3f"
      % (med(n_rate) / 1e6, med(q_rate) / 1e6, med([a / b for a, b in zip(n_rate, q_rate)])))
def cost(name, ops):
    c, s_ = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return c / ops * 1e9, s_ / ops * 1e9
# pps-8core: per wire packet (the loopback counter's, both ways), the busy time of each pinned
# CPU; qperf coalesces its messages into few packets, so this is netblast's cost alone.
n_cost = [cost("nbw-%d" % r, lo("nbw-%d" % r)) for r in R]
print("    netblast CPU per wire packet (busy time of its pinned CPU): client %.0f ns, server %.0f ns"
      % (med([x[0] for x in n_cost]), med([x[1] for x in n_cost])))
print("1 flow of 1-byte TCP messages, batched (sendmmsg of 64, reads of what has arrived: not qperf's receiver work):")
print("    batched application messages/s: netblast %.3f M/s, qperf %.3f M/s, ratio %.3f; %.0f TCP segments/s"
      % (med(b_rate) / 1e6, med(q_rate) / 1e6, med([a / b for a, b in zip(b_rate, q_rate)]), med(b_segs)))
# Batched: per application message, both tools coalescing messages into segments.
b_cost = [cost("nbb-%d" % r, b_rate[r - 1] * float(secs)) for r in R]
q_cost = [cost("qbw-%d" % r, q_rate[r - 1] * float(secs)) for r in R]
for side, k in (("client", 0), ("server", 1)):
    print("    %s CPU per message, batched (busy time of its pinned CPU): netblast %.1f ns, qperf %.1f ns, ratio %.3f (target <= 1.0)"
          % (side, med([x[k] for x in b_cost]), med([x[k] for x in q_cost]), med([x[k] / y[k] for x, y in zip(b_cost, q_cost)])))
print("one-way latency (RTT/2), 1-byte TCP: netblast %.2f us (spin; p50 %.2f us), qperf %.2f us, ratio %.3f (target <= 1.0)"
      % (med(n_lat) * 1e6, med(n_p50) * 1e6, med(q_lat) * 1e6, med([a / b for a, b in zip(n_lat, q_lat)])))
print("    netblast with --wait block (qperf's blocking method): %.2f us, ratio %.3f"
      % (med(n_latb) * 1e6, med([a / b for a, b in zip(n_latb, q_lat)])))
u = json.load(open(os.path.join(work, "udp.json")))
w = u["summary"]["ways"][0]["msgs"]
print("UDP 1-byte datagrams, one flow per CPU (%d flows): sent %.3f M/s, received %.3f M/s, lost %d of %d"
      % (len(u["streams"]), w["sent_per_s"] / 1e6, (w.get("received_per_s") or 0) / 1e6, w.get("lost") or 0, w["sent"]))
EOF
