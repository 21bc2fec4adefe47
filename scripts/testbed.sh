#!/usr/bin/env bash
# A fleet testbed on this machine: N network namespaces on a bridge, each running a netblast
# agent (`netblast serve` with a token), reachable from the host namespace where a coordinator
# runs. Needs root (namespaces, veth, bridge).
#
#   scripts/testbed.sh up N [--id K] [--rate RATE] [--vxlan]   # prints the agents and the token file
#   scripts/testbed.sh down [--id K]                           # removes everything `up` made
#
#   --id K      testbeds side by side: subnet 10.77.K.0/24, names nbtbK... (default 0)
#   --rate R    a tbf rate limit on every agent's link, both ways (e.g. 1gbit, 200mbit)
#   --vxlan     the agents (and the host) also join a VXLAN overlay (VNI 42, 10.78.K.0/24) over
#               the bridge, as the firewall seed's spokes; the printed addresses are the overlay's
#
# Agents: 10.77.K.(10+i):5210, HTTP responder on port 8080; they accept orders toward the
# testbed's networks only. The agent binary: $NETBLAST, else target/release/netblast, else
# target/debug/netblast, else netblast on PATH. State (pids, token, logs) lives in
# ${NETBLAST_TESTBED_DIR:-/tmp/netblast-testbed}-K; `down` removes it. A failed `up` removes
# what it made.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

cmd=${1:-}; shift || true
n=0; id=0; rate=""; vxlan=0
if [ "$cmd" = up ]; then
  n=${1:-}; shift || true
  if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt 200 ]; then
    echo "testbed.sh: up needs N in 1..200" >&2
    exit 2
  fi
fi
while [ $# -gt 0 ]; do
  case "$1" in
    --id) id=${2:-}; shift 2 ;;
    --rate) rate=${2:-}; shift 2 ;;
    --vxlan) vxlan=1; shift ;;
    *) echo "testbed.sh: unknown option $1" >&2; usage ;;
  esac
done
if ! [[ "$id" =~ ^[0-9]+$ ]] || [ "$id" -gt 99 ]; then
  echo "testbed.sh: --id must be 0..99" >&2
  exit 2
fi
[ "$cmd" = up ] || [ "$cmd" = down ] || usage

state="${NETBLAST_TESTBED_DIR:-/tmp/netblast-testbed}-$id"
pfx="nbtb${id}"
br="${pfx}br"
net="10.77.$id"
onet="10.78.$id"

down() {
  if [ -f "$state/pids" ]; then
    while read -r pid; do kill "$pid" 2>/dev/null || true; done < "$state/pids"
    sleep 0.3
    while read -r pid; do kill -9 "$pid" 2>/dev/null || true; done < "$state/pids"
  fi
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${pfx}a[0-9]+$" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  ip link del "${pfx}vx" 2>/dev/null || true
  ip link del "$br" 2>/dev/null || true
  rm -rf "$state"
}

if [ "$cmd" = down ]; then
  down
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "testbed.sh: needs root (network namespaces, veth, a bridge)" >&2
  exit 1
fi
bin=${NETBLAST:-}
for c in target/release/netblast target/debug/netblast; do
  [ -z "$bin" ] && [ -x "$c" ] && bin=$(realpath "$c")
done
[ -z "$bin" ] && bin=$(command -v netblast || true)
[ -n "$bin" ] || { echo "testbed.sh: no netblast binary (build it, or set NETBLAST)" >&2; exit 1; }

down  # leftovers of an earlier testbed with this id
on_exit() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    echo "testbed.sh: up failed; removing what it made" >&2
    down
  fi
}
trap on_exit EXIT
mkdir -p "$state"
chmod 700 "$state"
head -c 32 /dev/urandom | base64 > "$state/token"
chmod 600 "$state/token"
: > "$state/pids"

ip link add "$br" type bridge
ip addr add "$net.1/24" dev "$br"
ip link set "$br" up
if [ "$vxlan" = 1 ]; then
  ip link add "${pfx}vx" type vxlan id 42 dstport 4789 local "$net.1" dev "$br"
  ip addr add "$onet.1/24" dev "${pfx}vx"
  ip link set "${pfx}vx" up
fi
allow="--allow $net.0/24"
[ "$vxlan" = 1 ] && allow="$allow --allow $onet.0/24"
for i in $(seq 1 "$n"); do
  ns="${pfx}a$i"
  host_if="${pfx}h$i"
  ip netns add "$ns"
  ip link add "$host_if" type veth peer name eth0 netns "$ns"
  ip link set "$host_if" master "$br" up
  ip -n "$ns" addr add "$net.$((10 + i))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via "$net.1"
  if [ -n "$rate" ]; then
    tc qdisc add dev "$host_if" root tbf rate "$rate" burst 256kb latency 50ms
    ip netns exec "$ns" tc qdisc add dev eth0 root tbf rate "$rate" burst 256kb latency 50ms
  fi
  if [ "$vxlan" = 1 ]; then
    ip -n "$ns" link add vx0 type vxlan id 42 dstport 4789 local "$net.$((10 + i))" dev eth0
    ip -n "$ns" addr add "$onet.$((10 + i))/24" dev vx0
    ip -n "$ns" link set vx0 up
  fi
  # nsenter switches the network namespace only (ip netns exec would hide the cgroup v2 mount
  # the eBPF probe attaches to).
  # shellcheck disable=SC2086
  nsenter --net="/run/netns/$ns" "$bin" serve --bind 0.0.0.0 --port 5210 --http 8080 \
    --token-file "$state/token" $allow --probe tcpinfo > "$state/agent$i.log" 2>&1 &
  echo $! >> "$state/pids"
done
if [ "$vxlan" = 1 ]; then
  # Head-end replication: every overlay member floods to every other.
  members=("$net.1")
  for i in $(seq 1 "$n"); do members+=("$net.$((10 + i))"); done
  for m in "${members[@]}"; do
    if [ "$m" = "$net.1" ]; then dev="${pfx}vx"; run=(); else
      dev=vx0; run=(ip netns exec "${pfx}a$(( ${m##*.} - 10 ))"); fi
    for peer in "${members[@]}"; do
      [ "$peer" = "$m" ] && continue
      "${run[@]}" bridge fdb append 00:00:00:00:00:00 dev "$dev" dst "$peer"
    done
  done
fi
# Wait until every agent listens on its data port; an agent that died fails `up`.
for i in $(seq 1 "$n"); do
  listening=0
  for _ in $(seq 1 100); do
    if nsenter --net="/run/netns/${pfx}a$i" ss -Hltn 'sport = :5210' | grep -q .; then listening=1; break; fi
    sleep 0.05
  done
  if [ "$listening" = 0 ]; then
    echo "testbed.sh: agent $i ($bin) is not listening:" >&2
    tail -5 "$state/agent$i.log" >&2
    exit 1
  fi
done
trap - EXIT
echo "token: $state/token"
for i in $(seq 1 "$n"); do
  if [ "$vxlan" = 1 ]; then echo "agent: $onet.$((10 + i)):5210"; else echo "agent: $net.$((10 + i)):5210"; fi
done
