#!/usr/bin/env bash
# Two builds of netblast side by side on loopback, interleaved in one run: each build's client
# against its own `serve`, ROUNDS rounds of SECONDS per kind, and the median ratio (B / A) of
# each kind's rate and of its client's CPU time per operation. For a change that must leave
# the figures "within noise of before" (a refactor): ratios near 1 on this noisy box.
#
#   scripts/compare-builds.sh OLD_BINARY NEW_BINARY [ROUNDS] [SECONDS]   (defaults: 3 rounds of 3 s)
#
# Kinds: bulk-1flow (bits/s), latency (transactions/s), pps-8core with one flow (messages/s),
# cps (connections/s), http-max with 8 connections (responses/s), and the same open loop at
# 5 000 requests/s (responses/s, which should hold the rate; its client CPU per request is the
# figure that moves). Traffic stays on 127.0.0.1; every run is bounded by -t.
set -euo pipefail
A=${1:?old binary}
B=${2:?new binary}
ROUNDS=${3:-3}
SECS=${4:-3}
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# One server per build (data port and HTTP responder), each on its own ports.
start_server() { # BINARY DATA_PORT HTTP_PORT
  "$1" serve --port "$2" --http "$3" >"$work/serve-$2.log" 2>&1 &
  pids+=($!)
}
start_server "$A" 15301 18301
start_server "$B" 15302 18302
sleep 1

kinds=(bulk latency pps cps http http-open)
args_for() { # KIND DATA_PORT HTTP_PORT
  case $1 in
    bulk) echo "--target 127.0.0.1:$2 --profile bulk-1flow" ;;
    latency) echo "--target 127.0.0.1:$2 --profile latency" ;;
    pps) echo "--target 127.0.0.1:$2 --profile pps-8core --flows 1 --cpus 0" ;;
    cps) echo "--target 127.0.0.1:$2 --profile cps" ;;
    http) echo "--url http://127.0.0.1:$3/ --profile http-max -c 8" ;;
    http-open) echo "--url http://127.0.0.1:$3/ --profile http-max -c 8 --rate 5000" ;;
  esac
}

# rate and client CPU seconds per operation of one result, as "rate cpu_per_op"
figures() { # KIND RESULT
  python3 - "$1" "$2" <<'EOF'
import json, sys
kind, path = sys.argv[1], sys.argv[2]
r = json.load(open(path))
s = r["summary"]
cpu = s["cpu"]["client"]["user_s"] + s["cpu"]["client"]["system_s"]
if kind.startswith("http"):
    rate, ops = s["http"]["responses_per_s"], s["http"]["completed"]
elif kind == "bulk":
    w = s["ways"][0]
    side = w.get("receiver") or w["sender"]
    rate, ops = side["bits_per_s"], side["bytes"]
else:
    m = s["ways"][0]["msgs"]
    rate, ops = m["sent_per_s"], m["sent"]
print(rate, cpu / ops if ops else 0)
EOF
}

for ((r = 1; r <= ROUNDS; r++)); do
  for k in "${kinds[@]}"; do
    # Alternate which build goes first, so neither always meets the warmer host.
    if ((r % 2)); then order="A B"; else order="B A"; fi
    for who in $order; do
      if [[ $who == A ]]; then bin=$A; dp=15301; hp=18301; else bin=$B; dp=15302; hp=18302; fi
      # shellcheck disable=SC2046
      "$bin" run $(args_for "$k" "$dp" "$hp") -t "${SECS}s" -q -o "$work/$k-$who-$r.json" >/dev/null 2>&1 \
        || { echo "compare-builds: $who $k round $r failed" >&2; exit 1; }
      figures "$k" "$work/$k-$who-$r.json" >"$work/$k-$who-$r.fig"
    done
  done
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$work" "$ROUNDS" "${kinds[@]}" <<'EOF'
import statistics, sys
work, rounds, kinds = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
unit = {"bulk": "bits/s", "latency": "transactions/s", "pps": "messages/s", "cps": "connections/s", "http": "responses/s", "http-open": "responses/s"}
print(f"new / old, {rounds} interleaved rounds, medians (rate: higher is better; CPU per operation: lower is better)")
for k in kinds:
    rate, cpu = [], []
    for r in range(1, rounds + 1):
        a = [float(x) for x in open(f"{work}/{k}-A-{r}.fig").read().split()]
        b = [float(x) for x in open(f"{work}/{k}-B-{r}.fig").read().split()]
        rate.append(b[0] / a[0] if a[0] else float("nan"))
        cpu.append(b[1] / a[1] if a[1] else float("nan"))
    print(f"  {k:9} {unit[k]:15} rate {statistics.median(rate):.3f} (rounds {', '.join(f'{x:.2f}' for x in rate)})"
          f"   client CPU per operation {statistics.median(cpu):.3f} (rounds {', '.join(f'{x:.2f}' for x in cpu)})")
EOF
