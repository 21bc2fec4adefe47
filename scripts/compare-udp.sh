#!/usr/bin/env bash
# UDP at a bit rate: netblast against iperf3 -u on loopback, same datagram size, interleaved,
# several rounds, medians:
#   - at a rate both hold (RATE, default 500M): the loss each reports (both should be ~0, and
#     agree within noise), and the rate each achieved;
#   - unlimited (-b 0 for both): datagrams/s received, the ratio (target >= 1.0);
#   - unlimited with UDP GSO and GRO (netblast --gsro against iperf3 3.21 --gsro), when the
#     iperf3 run has --gsro;
#   - each end's process CPU time per datagram received (scripts/cost.sh).
# netblast (client and server) runs with --probe off: iperf3 reads no kernel statistics.
# iperf3: $IPERF3, else 3.21 built by scripts/anchors-build.sh, else the one on PATH.
#
#   scripts/compare-udp.sh [ROUNDS] [SECONDS]      (defaults: 3 rounds of 5 s; RATE=500M LEN=1400)
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-5}
RATE=${RATE:-500M}
LEN=${LEN:-1400}
cd "$(dirname "$0")/.."
TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
if [ -z "${IPERF3:-}" ]; then
  if [ -x "$TOOLS/iperf3-3.21/bin/iperf3" ]; then IPERF3=$TOOLS/iperf3-3.21/bin/iperf3; else IPERF3=$(command -v iperf3 || true); fi
fi
[ -n "$IPERF3" ] || { echo "iperf3 is not installed (apt-get install iperf3; scripts/anchors-build.sh for 3.21)" >&2; exit 2; }
IPV=$("$IPERF3" --version | head -1 | awk '{print $2}')
GSRO=0
if "$IPERF3" --help 2>&1 | grep -q -- --gsro; then GSRO=1; fi
cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15212}
PORT_IP=${PORT_IP:-15213}
WORK=$(mktemp -d)
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT
"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
"$IPERF3" -s -p "$PORT_IP" >"$WORK/ip-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5
# shellcheck source=scripts/cost.sh
. scripts/cost.sh
ip() { # name rate [flags]
  local name=$1 rate=$2; shift 2
  process_cost "$name" "${SERVERS[1]}" "$IPERF3" -c 127.0.0.1 -p "$PORT_IP" -u -b "$rate" -l "$LEN" -t "$SECS" -J "$@" >"$WORK/$name.json" || { cat "$WORK/$name.json" >&2; exit 1; }
  sleep 0.3
}
nb() { # name rate [flags]
  local name=$1 rate=$2; shift 2
  process_cost "$name" "${SERVERS[0]}" "$NB" run --target "127.0.0.1:$PORT_NB" -u -b "$rate" -l "$LEN" -t "$SECS" --probe off --json "$@" >"$WORK/$name.json" || { echo "netblast failed" >&2; exit 1; }
  sleep 0.3
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    ip "ip-$r" "$RATE"; nb "nb-$r" "$RATE"; ip "ipmax-$r" 0; nb "nbmax-$r" 0
    if (( GSRO )); then ip "ipgso-$r" 0 --gsro; nb "nbgso-$r" 0 --gsro; fi
  else
    nb "nb-$r" "$RATE"; ip "ip-$r" "$RATE"; nb "nbmax-$r" 0; ip "ipmax-$r" 0
    if (( GSRO )); then nb "nbgso-$r" 0 --gsro; ip "ipgso-$r" 0 --gsro; fi
  fi
  echo "round $r/$ROUNDS done" >&2
done
echo "iperf3 $IPV ($IPERF3)"
SECS="$SECS" GSRO="$GSRO" python3 - "$WORK" "$ROUNDS" "$RATE" "$LEN" <<'PY'
import json, os, statistics, sys
work, rounds, rate, length = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def load(n):
    return json.load(open(os.path.join(work, n + ".json")))
def iperf(n):
    s = load(n)["end"]["sum"]
    got = s["packets"] - s["lost_packets"]
    return {"loss": s["lost_percent"], "rx_per_s": got / s["seconds"], "bps": s["bits_per_second"], "jitter_us": s["jitter_ms"] * 1e3}
def netblast(n):
    d = load(n)
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (n, d["errors"]))
    w = d["summary"]["ways"][0]
    m = w["msgs"]
    q = (m.get("udp") or {}).get("quality") or {}
    return {"loss": 100.0 * (m.get("lost") or 0) / max(m["sent"], 1), "rx_per_s": m.get("received_per_s") or 0,
            "bps": w["sender"]["bits_per_s"], "jitter_us": q.get("jitter_ns", 0) / 1e3}
med = statistics.median
R = range(1, rounds + 1)
pairs = [("at -b %s" % rate, "ip", "nb"), ("unlimited (-b 0)", "ipmax", "nbmax")]
if os.environ.get("GSRO") == "1":
    pairs.append(("unlimited with GSO and GRO (--gsro)", "ipgso", "nbgso"))
for label, ipn, nbn in pairs:
    a = [iperf("%s-%d" % (ipn, r)) for r in R]
    b = [netblast("%s-%d" % (nbn, r)) for r in R]
    print("UDP %s, %s-byte datagrams, %d rounds, medians:" % (label, length, rounds))
    print("    iperf3:   sent %.0f Mbit/s, received %.0f k datagrams/s, lost %.3f%%, jitter %.1f us"
          % (med(x["bps"] for x in a) / 1e6, med(x["rx_per_s"] for x in a) / 1e3, med(x["loss"] for x in a), med(x["jitter_us"] for x in a)))
    print("    netblast: sent %.0f Mbit/s, received %.0f k datagrams/s, lost %.3f%%, jitter %.1f us"
          % (med(x["bps"] for x in b) / 1e6, med(x["rx_per_s"] for x in b) / 1e3, med(x["loss"] for x in b), med(x["jitter_us"] for x in b)))
    what = {"ipmax": "unlimited", "ipgso": "unlimited gsro"}.get(ipn, "at the same rate")
    print("    received datagrams/s %s, netblast/iperf3: ratio %.3f%s"
          % (what, med(y["rx_per_s"] / x["rx_per_s"] for x, y in zip(a, b)), "" if ipn == "ip" else " (target >= 1.0)"))
    def cost(n, x):
        c, srv = map(float, open(os.path.join(work, n + ".cost")).read().split())
        got = x["rx_per_s"] * float(os.environ.get("SECS", "5"))
        return c / got * 1e9, srv / got * 1e9
    ca = [cost("%s-%d" % (ipn, r), x) for r, x in zip(R, a)]
    cb = [cost("%s-%d" % (nbn, r), x) for r, x in zip(R, b)]
    for side, k in (("client", 0), ("server", 1)):
        print("    %s CPU per datagram received %s: netblast %.0f ns, iperf3 %.0f ns, ratio %.3f (target <= 1.0)"
              % (side, what, med(y[k] for y in cb), med(x[k] for x in ca),
                 med(y[k] / x[k] for x, y in zip(ca, cb))))
PY
