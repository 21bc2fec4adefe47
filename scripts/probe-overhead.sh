#!/usr/bin/env bash
# What the eBPF probe costs: bulk throughput with the probe on (--probe ebpf) vs off
# (--probe tcpinfo), interleaved rounds, and the probe's own run time from the kernel's BPF
# statistics (BPF_ENABLE_STATS, via --probe-stats). Needs root.
#
#   scripts/probe-overhead.sh [ROUNDS] [SECONDS]      (defaults: 6 rounds of 5 s)
#
# Two paths: loopback (64 KiB segments, as fast as it goes), and a veth pair between two
# network namespaces this script creates, MTU 1500, shaped to 10 Gbit/s with tbf: the probe's
# cost follows the ACK rate, which a 1500-byte MTU raises.
# Targets (issue 4): throughput cost <= 3%, probe CPU <= 1% of one core at 10 Gbit/s.
set -euo pipefail
ROUNDS=${1:-6}
SECS=${2:-5}
cd "$(dirname "$0")/.."
[ "$(id -u)" -eq 0 ] || { echo "probe-overhead.sh: needs root to load eBPF programs" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
"$NB" doctor | grep -q "eBPF probe  *loads" || { "$NB" doctor >&2; echo "probe-overhead.sh: the eBPF probe does not load here" >&2; exit 2; }
PORT=${PORT_NB:-15212}
WORK=$(mktemp -d)
TAG=$$
NSA=nbo${TAG}a
NSB=nbo${TAG}b
NET=10.214.$((TAG % 250))
PIDS=()
cleanup() {
  kill "${PIDS[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
  ip netns del "$NSA" 2>/dev/null || true
  ip netns del "$NSB" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT" --probe tcpinfo 2>"$WORK/serve.log" &
PIDS+=($!)
ip netns add "$NSA"
ip netns add "$NSB"
ip link add "${NSA}v" netns "$NSA" type veth peer name "${NSB}v" netns "$NSB"
ip -n "$NSA" addr add "$NET.1/24" dev "${NSA}v"
ip -n "$NSB" addr add "$NET.2/24" dev "${NSB}v"
for ns in "$NSA" "$NSB"; do
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "${ns}v" mtu 1500 up
done
ip netns exec "$NSA" tc qdisc add dev "${NSA}v" root tbf rate 10gbit burst 4mb latency 20ms
# nsenter switches only the network namespace (ip netns exec would hide the cgroup v2 mount).
nsenter --net=/run/netns/"$NSB" "$NB" serve --bind "$NET.2" --port "$PORT" --probe tcpinfo 2>"$WORK/serve-ns.log" &
PIDS+=($!)
sleep 0.5
run() { "$NB" run --target "127.0.0.1:$PORT" -t "$SECS" --json "$@"; sleep 0.3; }
run_veth() { nsenter --net=/run/netns/"$NSA" "$NB" run --target "$NET.2:$PORT" -t "$SECS" --json "$@"; sleep 0.3; }
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    run --probe ebpf --probe-stats >"$WORK/lo-on-$r.json"; run --probe tcpinfo >"$WORK/lo-off-$r.json"
    run_veth --probe ebpf --probe-stats >"$WORK/veth-on-$r.json"; run_veth --probe tcpinfo >"$WORK/veth-off-$r.json"
  else
    run --probe tcpinfo >"$WORK/lo-off-$r.json"; run --probe ebpf --probe-stats >"$WORK/lo-on-$r.json"
    run_veth --probe tcpinfo >"$WORK/veth-off-$r.json"; run_veth --probe ebpf --probe-stats >"$WORK/veth-on-$r.json"
  fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK" "$ROUNDS" "$SECS" <<'PY'
import json, os, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(n):
    d = json.load(open(os.path.join(work, n + ".json")))
    if not d["complete"]:
        sys.exit("run %s incomplete: %s" % (n, d["errors"]))
    return d
med = statistics.median
bps = lambda d: d["summary"]["ways"][0]["receiver"]["bits_per_s"]
print("eBPF probe overhead, %d interleaved rounds x %s s, 1 flow, probe on (--probe ebpf) vs off (--probe tcpinfo)"
      % (rounds, secs))
for path, label in (("lo", "loopback (64 KiB segments)"), ("veth", "veth, MTU 1500, tbf 10 Gbit/s")):
    on = [load("%s-on-%d" % (path, r)) for r in range(1, rounds + 1)]
    off = [load("%s-off-%d" % (path, r)) for r in range(1, rounds + 1)]
    assert all(d["probe"]["tcp_source"] == "ebpf" for d in on), "probe did not load"
    ratio = med([bps(a) / bps(b) for a, b in zip(on, off)])
    core = med([d["probe"]["kernel_run_ns"] / 1e9 / d["summary"]["duration_s"] for d in on])
    per_run = med([d["probe"]["kernel_run_ns"] / max(d["probe"]["kernel_runs"], 1) for d in on])
    runs = med([d["probe"]["kernel_runs"] / d["summary"]["duration_s"] for d in on])
    gbps = med([bps(d) for d in on]) / 1e9
    print("%s:" % label)
    print("  throughput on %.2f / off %.2f Gbit/s, on/off %.4f: cost %.2f%% (target <= 3%%)"
          % (gbps, med([bps(d) for d in off]) / 1e9, ratio, (1 - ratio) * 100))
    print("  probe CPU %.3f%% of one core at %.2f Gbit/s = %.3f%% per 10 Gbit/s (target <= 1%%); %.0f runs/s, %.0f ns per run"
          % (core * 100, gbps, core * 100 * 10 / gbps, runs, per_run))
PY
