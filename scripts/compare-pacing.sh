#!/usr/bin/env bash
# What a paced TCP sender (-b) costs, netblast beside iperf3: CPU seconds per gigabyte moved at
# 1M, 100M and 1G for one flow and 64 flows x 100M, both tools on loopback, interleaved, the
# median of ROUNDS, and the ratio netblast/iperf3. The target (issue 54): at most 1.5x at every
# rate; the script exits 1 when a rate misses it.
#
#   scripts/compare-pacing.sh [ROUNDS] [SECONDS]      (defaults: 3 rounds of 6 s)
#
# CPU is read from /proc/PID/stat of the client and of its server (both ends' user and system
# time, every thread) over the steady middle of each run, from LEAD (1 s) after the client
# starts to 0.5 s before its end: start-up and set-up are neither tool's pacing cost. The bytes
# of that window are the rate times its length; each run's own received total is checked
# against the rate (within 5%) so that a tool that did not hold it is not credited with it.
# Both tools at equal settings otherwise: unpinned, no kernel statistics beyond their own
# (netblast --probe off), the host's congestion control.
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-6}
LEAD=${LEAD:-1}
cd "$(dirname "$0")/.."
command -v iperf3 >/dev/null || { echo "iperf3 is not installed (apt-get install iperf3)" >&2; exit 2; }
command -v jq >/dev/null || { echo "jq is not installed (apt-get install jq)" >&2; exit 2; }
(( SECS >= LEAD + 2 )) || { echo "SECONDS must be at least $((LEAD + 2))" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15310}
PORT_IP=${PORT_IP:-15301}
WORK=$(mktemp -d)
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
NB_SERVER=$!
SERVERS+=("$NB_SERVER")
iperf3 -s -B 127.0.0.1 -p "$PORT_IP" >"$WORK/ip-serve.log" 2>&1 &
IP_SERVER=$!
SERVERS+=("$IP_SERVER")
sleep 0.5

HZ=$(getconf CLK_TCK)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# measure NAME SERVER_PID RATE_BITS CMD...: runs CMD in the background; writes "CPU_S_PER_GB
# RECEIVED_FILE" to $WORK/NAME.cost, the CPU of CMD and of SERVER_PID over the window.
measure() {
  local name=$1 server=$2 bits=$3; shift 3
  "$@" >"$WORK/$name.json" 2>"$WORK/$name.err" &
  local pid=$! c0 s0 c1 s1 t0 t1
  sleep "$LEAD"
  c0=$(ticks "$pid"); s0=$(ticks "$server"); t0=$(date +%s.%N)
  sleep "$(awk -v s="$SECS" -v l="$LEAD" 'BEGIN { print s - l - 0.5 }')"
  c1=$(ticks "$pid"); s1=$(ticks "$server"); t1=$(date +%s.%N)
  wait "$pid" || { echo "$name failed: $*" >&2; cat "$WORK/$name.err" "$WORK/$name.json" >&2; exit 1; }
  echo "$c0 $c1 $s0 $s1 $t0 $t1 $bits $HZ" |
    awk '{ cpu = ($2 - $1 + $4 - $3) / $8; gb = $7 / 8 * ($6 - $5) / 1e9; print cpu / gb }' >"$WORK/$name.cost"
  sleep 0.3
}

# held NAME RECEIVED_BITS_PER_S RATE_BITS: the run held its rate within 5%.
held() {
  awk -v got="$2" -v want="$3" -v n="$1" 'BEGIN {
    if (got < want * 0.95 || got > want * 1.05) { printf "%s: received %.1f Mbit/s, asked %.1f\n", n, got / 1e6, want / 1e6; exit 1 }
  }' >&2
}

median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

CASES=("1M 1 1e6" "100M 1 1e8" "1G 1 1e9" "100M 64 1e8")
printf '%-12s %16s %16s %8s\n' "-b x flows" "netblast s/GB" "iperf3 s/GB" "ratio"
status=0
for c in "${CASES[@]}"; do
  read -r rate flows bits <<<"$c"
  total=$(awk -v b="$bits" -v f="$flows" 'BEGIN { printf "%.0f", b * f }')
  for r in $(seq 1 "$ROUNDS"); do
    nb=(measure "nb-$rate-$flows-$r" "$NB_SERVER" "$total" "$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" -b "$rate" -P "$flows" --probe off --json)
    ip=(measure "ip-$rate-$flows-$r" "$IP_SERVER" "$total" iperf3 -c 127.0.0.1 -p "$PORT_IP" -t "$SECS" -b "$rate" -P "$flows" -J)
    # Alternate which tool goes first, so drift on the box favours neither.
    if (( r % 2 )); then "${nb[@]}"; "${ip[@]}"; else "${ip[@]}"; "${nb[@]}"; fi
    held "netblast -b $rate -P $flows" "$(jq '.summary.ways[0].receiver.bits_per_s' "$WORK/nb-$rate-$flows-$r.json")" "$total"
    held "iperf3 -b $rate -P $flows" "$(jq '.end.sum_received.bits_per_second' "$WORK/ip-$rate-$flows-$r.json")" "$total"
  done
  nbm=$(cat "$WORK"/nb-"$rate"-"$flows"-*.cost | median)
  ipm=$(cat "$WORK"/ip-"$rate"-"$flows"-*.cost | median)
  ratio=$(echo "$nbm $ipm" | awk '{ print ($2 > 0) ? $1 / $2 : 0 }')
  verdict=$(echo "$ratio" | awk '{ print ($1 <= 1.5) ? "ok" : "OVER 1.5x" }')
  [[ "$verdict" == ok ]] || status=1
  printf '%-12s %16.3f %16.3f %7.2fx %s\n' "$rate x $flows" "$nbm" "$ipm" "$ratio" "$verdict"
done
echo "CPU seconds (client and server, user and system) per GB over each run's steady window, median of $ROUNDS; $(nproc) CPUs shared by both ends"
exit "$status"
