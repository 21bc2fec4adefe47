#!/usr/bin/env bash
# The floor under bulk TCP on loopback: a minimal C sender and receiver (scripts/floor/bulk.c:
# send and recv in a loop, nothing else) beside iperf3 and netblast at the same send size, in
# interleaved rounds; prints each one's median and its ratio to iperf3 in the same round.
# What it shows on a host: whether netblast's gap to iperf3 is in the send/receive loop itself
# (then the minimal program is faster than netblast) or in something iperf3 does besides it.
# The minimal receiver runs twice, reading 1 MiB per call (as netblast) and 64 KiB: on loopback
# the sender's CPU also runs the receiver's TCP input for each segment it sends while the
# receiver is not holding its socket, so how the receiver reads moves work between the CPUs.
#
#   scripts/floor-bulk.sh [ROUNDS] [SECONDS]      (defaults: 10 rounds of 2 s; BLOCK=1048576)
#   CONGESTION=cubic scripts/floor-bulk.sh          (all three with that congestion control)
set -euo pipefail
ROUNDS=${1:-10}
SECS=${2:-2}
BLOCK=${BLOCK:-1048576}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
command -v cc >/dev/null || { echo "no C compiler (apt-get install build-essential)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
cc -O2 -o "$WORK/bulk" scripts/floor/bulk.c
P_FLOOR=${P_FLOOR:-15280}; P_NB=${P_NB:-15281}; P_IP=${P_IP:-15282}; P_SMALL=${P_SMALL:-15283}
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$WORK/bulk" sink "$P_FLOOR" & SERVERS+=($!)
"$WORK/bulk" sink "$P_SMALL" 65536 & SERVERS+=($!)
"$NB" serve --bind 127.0.0.1 --port "$P_NB" --probe off 2>"$WORK/nb-serve.log" & SERVERS+=($!)
iperf3 -s -B 127.0.0.1 -p "$P_IP" >/dev/null 2>&1 & SERVERS+=($!)
sleep 0.5
CCA_IP=(); CCA_NB=()
if [[ -n "${CONGESTION:-}" ]]; then CCA_IP=(-C "$CONGESTION"); CCA_NB=(-C "$CONGESTION"); fi
for r in $(seq 1 "$ROUNDS"); do
  nonblock=$("$WORK/bulk" source "$P_FLOOR" "$SECS" "$BLOCK" nonblock)
  blocking=$("$WORK/bulk" source "$P_FLOOR" "$SECS" "$BLOCK")
  small=$("$WORK/bulk" source "$P_SMALL" "$SECS" "$BLOCK")
  ip=$(iperf3 -c 127.0.0.1 -p "$P_IP" -t "$SECS" -l "$BLOCK" "${CCA_IP[@]}" -J | python3 -c 'import json,sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 1e9)')
  nb=$("$NB" run --target "127.0.0.1:$P_NB" -t "$SECS" -l "$BLOCK" "${CCA_NB[@]}" --probe off --json \
    | python3 -c 'import json,sys; print(sum(w["receiver"]["bits_per_s"] for w in json.load(sys.stdin)["summary"]["ways"]) / 1e9)')
  echo "$nonblock $blocking $ip $nb $small" >>"$WORK/rounds"
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK/rounds" "$ROUNDS" "$SECS" "$BLOCK" "${CONGESTION:-$(cat /proc/sys/net/ipv4/tcp_congestion_control)}" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
print("bulk TCP floor on loopback, %s rounds x %s s, %s-byte sends, 1 flow, congestion control %s, medians:"
      % tuple(sys.argv[2:6]))
for i, name in enumerate(["minimal C, non-blocking", "minimal C, blocking", "iperf3", "netblast (--probe off)",
                         "minimal C, 64 KiB reads"]):
    print("%-26s %6.2f Gb/s, ratio to iperf3 %.3f" % (name, statistics.median(r[i] for r in rows),
                                                   statistics.median(r[i] / r[2] for r in rows)))
PY
