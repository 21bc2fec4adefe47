#!/usr/bin/env bash
# Runs netblast and iperf3 back to back on loopback, interleaved, several rounds, and prints the
# median netblast/iperf3 receiver-throughput ratio for 1 flow, 2 flows and zero-copy sending,
# plus Gbit/s per CPU-second on each side.
#
#   scripts/compare-iperf3.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds of 5 s)
#
# Both servers run on this machine, so client and server share its cores: the ratio compares
# the tools under the same conditions, the absolute figures are a property of this box.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15210}
PORT_IP=${PORT_IP:-15201}
WORK=$(mktemp -d)
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
SERVERS=()
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
iperf3 -s -B 127.0.0.1 -p "$PORT_IP" >"$WORK/ip-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5

run_iperf() { # name args...
  local name=$1; shift
  iperf3 -c 127.0.0.1 -p "$PORT_IP" -t "$SECS" -J "$@" >"$WORK/$name.json" || { echo "iperf3 $* failed" >&2; cat "$WORK/$name.json" >&2; exit 1; }
  sleep 0.3
}
run_nb() { # name args...
  local name=$1; shift
  "$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" --json "$@" >"$WORK/$name.json" || { echo "netblast $* failed" >&2; exit 1; }
  sleep 0.3
}

for r in $(seq 1 "$ROUNDS"); do
  # Alternate which tool goes first, so drift on the box does not favour either.
  if (( r % 2 )); then
    run_iperf "ipl-$r" -l 1M
    run_iperf "ip1-$r"; run_nb "nb1-$r"
    run_iperf "ip2-$r" -P 2; run_nb "nb2-$r" --flows 2
    run_iperf "ipz-$r" -Z; run_nb "nbz-$r" --zerocopy
  else
    run_nb "nb1-$r"; run_iperf "ip1-$r"
    run_nb "nb2-$r" --flows 2; run_iperf "ip2-$r" -P 2
    run_nb "nbz-$r" --zerocopy; run_iperf "ipz-$r" -Z
    run_iperf "ipl-$r" -l 1M
  fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECS" <<'EOF'
import json, os, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def ip(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    e = d["end"]
    bps = e["sum_received"]["bits_per_second"]
    cpu = e["cpu_utilization_percent"]
    # iperf3 reports (user+system)/wall x 100 per process: 100 = one CPU busy.
    return bps, bps / max(cpu["host_total"] / 100, 1e-9), bps / max(cpu["remote_total"] / 100, 1e-9)
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    s = d["summary"]
    bps = sum(w["receiver"]["bits_per_s"] for w in s["ways"])
    return bps, s["cpu"]["bits_per_client_cpu_s"], s["cpu"]["bits_per_server_cpu_s"]
print("netblast vs iperf3 on loopback, %d rounds x %s s, medians (client and server share this machine's %d CPUs)"
      % (rounds, secs, os.cpu_count()))
print("%-10s %12s %12s %7s   %-26s %-26s" % ("test", "netblast", "iperf3", "ratio", "Gbit/CPU-s client nb/ip", "Gbit/CPU-s server nb/ip"))
for key, label in (("1", "1 flow"), ("2", "2 flows"), ("z", "zero-copy")):
    n = [nb("nb%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    i = [ip("ip%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    ratios = [a[0] / b[0] for a, b in zip(n, i)]
    med = lambda xs: statistics.median(xs)
    print("%-10s %8.2f Gb/s %8.2f Gb/s %7.3f   %8.1f / %-15.1f %8.1f / %-15.1f" % (
        label, med([x[0] for x in n]) / 1e9, med([x[0] for x in i]) / 1e9, med(ratios),
        med([x[1] for x in n]) / 1e9, med([x[1] for x in i]) / 1e9,
        med([x[2] for x in n]) / 1e9, med([x[2] for x in i]) / 1e9))
l = [ip("ipl-%d" % r) for r in range(1, rounds + 1)]
n = [nb("nb1-%d" % r) for r in range(1, rounds + 1)]
print("%-10s %12s %8.2f Gb/s %7.3f   (vs iperf3 -l 1M, its largest send size: shows the gain is the send size)" % (
    "1 flow -l1M", "", statistics.median([x[0] for x in l]) / 1e9, statistics.median([a[0] / b[0] for a, b in zip(n, l)])))
print("ratio = median over rounds of (netblast receiver Gbit/s / iperf3 receiver Gbit/s), same round")
EOF
