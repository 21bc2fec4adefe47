#!/usr/bin/env bash
# Runs netblast and iperf3 back to back on loopback, interleaved, several rounds, and prints the
# median netblast/iperf3 receiver-throughput ratio and each end's CPU time per gigabyte moved,
# at equal settings: the same send size (BLOCK, default 1M, iperf3 -l), 1 flow, 2 flows and
# zero-copy sending (sendfile, iperf3 -Z), both tools without kernel statistics beyond their
# own (netblast --probe off on both ends; the probe's cost is scripts/probe-overhead.sh's), and
# the same pinning: client on CPU 0, server on CPU 1 (PIN=C,S; iperf3 -A C,S, netblast --cpus C
# --server-cpus S; PIN=none: neither pinned, netblast's client then pins itself as shipped). A
# last line compares each tool as shipped (netblast's 2 MiB sends, eBPF probe and pinned client,
# iperf3's 128 KiB sends, unpinned).
#
#   scripts/compare-iperf3.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds of 5 s; BLOCK=1M)
#   CONGESTION=cubic scripts/compare-iperf3.sh          (both tools with -C cubic)
#   PIN=none scripts/compare-iperf3.sh                  (no pinning at equal settings)
#
# The congestion control decides more than the tools do on loopback: with bbr (its internal
# pacing) every sender here moves about half of what it moves with cubic, and the ratio between
# the tools is not the same under both. The header names the one in use; CONGESTION sets it
# for both.
#
# Both servers run on this machine, so client and server share its cores: the ratio compares
# the tools under the same conditions, the absolute figures are a property of this box.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
BLOCK=${BLOCK:-1M}
# Two CPUs or more: each end on its own, as the other tools' scripts do.
if [[ -z "${PIN:-}" ]]; then
  if (( $(nproc) >= 2 )); then PIN=0,1; else PIN=none; fi
fi
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

# Equal settings: neither end reads kernel statistics. As shipped: a server with its probe.
"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
"$NB" serve --bind 127.0.0.1 --port "$((PORT_NB + 1))" 2>"$WORK/nb-serve-shipped.log" &
SERVERS+=($!)
iperf3 -s -B 127.0.0.1 -p "$PORT_IP" >"$WORK/ip-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5

run_iperf() { # name args...
  local name=$1; shift
  iperf3 -c 127.0.0.1 -p "$PORT_IP" -t "$SECS" -J "$@" >"$WORK/$name.json" || { echo "iperf3 $* failed" >&2; cat "$WORK/$name.json" >&2; exit 1; }
  sleep 0.3
}
run_nb() { # name args...   (SHIPPED=1: against the server with its probe)
  local name=$1; shift
  "$NB" run --target "127.0.0.1:$((PORT_NB + ${SHIPPED:-0}))" -t "$SECS" --json "$@" >"$WORK/$name.json" || { echo "netblast $* failed" >&2; exit 1; }
  sleep 0.3
}

# Equal settings: the same send size, the same congestion control, and no probe.
EQ_IP=(-l "$BLOCK")
EQ_NB=(-l "${BLOCK}iB" --probe off)
if [[ "$PIN" != none ]]; then
  EQ_IP+=(-A "$PIN"); EQ_NB+=(--cpus "${PIN%,*}" --server-cpus "${PIN#*,}")
  PINNED="client CPU ${PIN%,*}, server CPU ${PIN#*,} for both (iperf3 -A $PIN)"
else
  PINNED="none (netblast's client pins itself, iperf3 does not)"
fi
CC_USED=$(cat /proc/sys/net/ipv4/tcp_congestion_control 2>/dev/null || echo unknown)
if [[ -n "${CONGESTION:-}" ]]; then
  EQ_IP+=(-C "$CONGESTION"); EQ_NB+=(-C "$CONGESTION"); CC_USED="$CONGESTION (set for both)"
else
  CC_USED="$CC_USED (the host's default)"
fi
for r in $(seq 1 "$ROUNDS"); do
  # Alternate which tool goes first, so drift on the box does not favour either.
  if (( r % 2 )); then
    run_iperf "ip1-$r" "${EQ_IP[@]}"; run_nb "nb1-$r" "${EQ_NB[@]}"
    run_iperf "ip2-$r" "${EQ_IP[@]}" -P 2; run_nb "nb2-$r" "${EQ_NB[@]}" --flows 2
    run_iperf "ipz-$r" "${EQ_IP[@]}" -Z; run_nb "nbz-$r" "${EQ_NB[@]}" --zerocopy
    run_iperf "ipd-$r"; SHIPPED=1 run_nb "nbd-$r"
  else
    run_nb "nb1-$r" "${EQ_NB[@]}"; run_iperf "ip1-$r" "${EQ_IP[@]}"
    run_nb "nb2-$r" "${EQ_NB[@]}" --flows 2; run_iperf "ip2-$r" "${EQ_IP[@]}" -P 2
    run_nb "nbz-$r" "${EQ_NB[@]}" --zerocopy; run_iperf "ipz-$r" "${EQ_IP[@]}" -Z
    SHIPPED=1 run_nb "nbd-$r"; run_iperf "ipd-$r"
  fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECS" "$BLOCK" "$CC_USED" "$PINNED" <<'PY'
import json, os, statistics, sys
work, rounds, secs, block, cc, pinned = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
# Each run as (receiver bit/s, client CPU-s per GB, server CPU-s per GB): the CPU each end's
# process spent over the run, per 10^9 bytes received.
def ip(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    e = d["end"]
    bps = e["sum_received"]["bits_per_second"]
    cpu = e["cpu_utilization_percent"]
    # iperf3 reports (user+system)/wall x 100 per process: 100 = one CPU busy.
    return bps, cpu["host_total"] / 100 / (bps / 8e9), cpu["remote_total"] / 100 / (bps / 8e9)
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    s = d["summary"]
    bps = sum(w["receiver"]["bits_per_s"] for w in s["ways"])
    c = s["cpu"]
    per = lambda b: 8e9 / b if b else float("nan")
    return bps, per(c.get("bits_per_client_cpu_s") or 0), per(c.get("bits_per_server_cpu_s") or 0)
med = statistics.median
print("netblast vs iperf3 on loopback, %d rounds x %s s, medians (client and server share this machine's %d CPUs)"
      % (rounds, secs, os.cpu_count()))
print("congestion control: %s; as shipped uses the host's default" % cc)
print("pinning at equal settings: %s; as shipped: netblast's client pinned, the rest not" % pinned)
print("%-22s %11s %11s %7s   %-24s %-24s" % ("test", "netblast", "iperf3", "ratio", "client CPU ms/GB nb/ip", "server CPU ms/GB nb/ip"))
rows = (("1", "1 flow, -l " + block), ("2", "2 flows, -l " + block), ("z", "zero-copy, -l " + block),
        ("d", "as shipped"))
for key, label in rows:
    n = [nb("nb%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    i = [ip("ip%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    ratios = [a[0] / b[0] for a, b in zip(n, i)]
    print("%-22s %6.2f Gb/s %6.2f Gb/s %7.3f   %8.1f / %-13.1f %8.1f / %-13.1f" % (
        label, med([x[0] for x in n]) / 1e9, med([x[0] for x in i]) / 1e9, med(ratios),
        med([x[1] for x in n]) * 1e3, med([x[1] for x in i]) * 1e3,
        med([x[2] for x in n]) * 1e3, med([x[2] for x in i]) * 1e3))
for key, label in rows:
    n = [nb("nb%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    i = [ip("ip%s-%d" % (key, r)) for r in range(1, rounds + 1)]
    for side, k in (("client", 1), ("server", 2)):
        print("%s CPU per GB, %s: netblast %.1f ms, iperf3 %.1f ms, ratio %.3f (target <= 1.0)" % (
            side, label, med([x[k] for x in n]) * 1e3, med([x[k] for x in i]) * 1e3,
            med([a[k] / b[k] for a, b in zip(n, i)])))
print("ratio = median over rounds of (netblast receiver Gbit/s / iperf3 receiver Gbit/s), same round (target >= 1.0);")
print("CPU ms/GB = each end's process CPU time per 10^9 bytes received (lower is cheaper);")
print("as shipped = netblast's defaults (2 MiB sends, eBPF probe) against iperf3's (128 KiB sends)")
PY
