#!/usr/bin/env bash
# Runs netblast and netperf back to back on loopback with the same pinning (client CPU 0,
# server CPU 1), interleaved, several rounds, one flow each, and prints median ratios:
#   - connections per second: `netperf -t TCP_CRR -- -r 1,1` (connect, 1-byte request,
#     1-byte response, close) vs `netblast run --profile cps -P 1` as shipped (the same
#     exchange, and the same close: netperf's server closes first, so the TIME_WAIT is its);
#     `--close fin` (the client closes first and keeps the TIME_WAIT) is a second line;
#   - request/response: `netperf -t TCP_RR -- -r 1,1` vs `netblast run --profile latency
#     --wait block` (netperf's blocking method), transactions per second.
# netblast (client and server) runs with --probe off: netperf reads no kernel statistics (the probe's own cost is
# scripts/probe-overhead.sh's).
# netperf is in Debian's non-free section: when it is missing and this runs as root on Debian,
# the script adds that section for the one install and removes it again.
#
#   scripts/compare-netperf.sh [ROUNDS] [SECONDS]      (defaults: 5 rounds of 5 s)
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CCPU=${CCPU:-0}
SCPU=${SCPU:-1}
cd "$(dirname "$0")/.."

install_netperf() {
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null && [ -r /etc/os-release ] || return 1
  local codename; codename=$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release)
  [ -n "$codename" ] || return 1
  # The mirror this machine already uses for Debian (its own apt sources), not one named here.
  local mirror
  mirror=$( { awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }' /etc/apt/sources.list.d/*.sources 2>/dev/null
              awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { print $i; break } }' \
                /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null; } | grep -v -- '-security' | head -1)
  [ -n "$mirror" ] || { echo "no Debian mirror in this machine's apt sources" >&2; return 1; }
  local src=/etc/apt/sources.list.d/netblast-nonfree-tmp.sources
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: non-free\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
    "$mirror" "$codename" >"$src"
  local ok=0
  DEBIAN_FRONTEND=noninteractive apt-get update -qq -o Dir::Etc::sourcelist="$src" -o Dir::Etc::sourceparts=- \
    -o APT::Get::List-Cleanup=0 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq netperf >/dev/null || ok=1
  rm -f "$src"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq || true
  return $ok
}
if ! command -v netperf >/dev/null; then
  echo "netperf is not installed; adding Debian non-free for it, once" >&2
  install_netperf || { echo "netperf is not installed (Debian non-free: apt-get install netperf)" >&2; exit 2; }
fi

cargo build --release -q -p netblast
NB=target/release/netblast
PORT_NB=${PORT_NB:-15213}
PORT_NP=${PORT_NP:-19767}
WORK=$(mktemp -d)
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
# -D: stay in the foreground (so the trap can stop it); -T below pins netserver's child.
netserver -D -L 127.0.0.1 -p "$PORT_NP" >"$WORK/np-serve.log" 2>&1 &
SERVERS+=($!)
sleep 0.5

# shellcheck source=scripts/cost.sh
. scripts/cost.sh
np() { # name test
  window_cost "$1" netperf -H 127.0.0.1 -p "$PORT_NP" -t "$2" -l "$SECS" -T "$CCPU,$SCPU" -P 0 -- -r 1,1 -o THROUGHPUT \
    >"$WORK/$1.txt" 2>&1 || { cat "$WORK/$1.txt" >&2; exit 1; }
  sleep 0.3
}
nb() { # name args...
  local name=$1; shift
  window_cost "$name" "$NB" run --target "127.0.0.1:$PORT_NB" -t "$SECS" --cpus "$CCPU" --server-cpus "$SCPU" --probe off --json "$@" \
    >"$WORK/$name.json" || { echo "netblast $* failed" >&2; exit 1; }
  sleep 0.3
}

for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then
    np "ncrr-$r" TCP_CRR; nb "bcps-$r" --profile cps -P 1; nb "bcpsd-$r" --profile cps -P 1 --close fin
    np "nrr-$r" TCP_RR; nb "brr-$r" --profile latency --wait block
  else
    nb "bcpsd-$r" --profile cps -P 1 --close fin; nb "bcps-$r" --profile cps -P 1; np "ncrr-$r" TCP_CRR
    nb "brr-$r" --profile latency --wait block; np "nrr-$r" TCP_RR
  fi
  echo "round $r/$ROUNDS done" >&2
done

python3 - "$WORK" "$ROUNDS" "$SECS" <<'PY'
import json, os, re, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def npval(name):
    text = open(os.path.join(work, name + ".txt")).read()
    nums = [l.strip() for l in text.splitlines() if re.fullmatch(r"\s*[\d.]+\s*", l)]
    if not nums:
        sys.exit("no throughput in netperf output %s:\n%s" % (name, text))
    return float(nums[-1])
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    if not d["complete"]:
        sys.exit("netblast run %s incomplete: %s" % (name, d["errors"]))
    return d["summary"]["ways"][0]
med = statistics.median
R = range(1, rounds + 1)
n_crr = [npval("ncrr-%d" % r) for r in R]
b_cps = [nb("bcps-%d" % r)["msgs"]["sent_per_s"] for r in R]
b_fail = [nb("bcps-%d" % r)["msgs"].get("lost") or 0 for r in R]
b_conn = [nb("bcps-%d" % r)["latency"]["p50_ns"] / 1e3 for r in R]
n_rr = [npval("nrr-%d" % r) for r in R]
b_rr = [nb("brr-%d" % r)["msgs"]["sent_per_s"] for r in R]
print("netblast vs netperf on loopback, %d rounds x %s s, client CPU %s, server CPU %s, one flow, medians"
      % (rounds, secs, os.environ.get("CCPU", "0"), os.environ.get("SCPU", "1")))
print("connections/s (connect, 1-byte request and response, the server closes first): netblast %.0f /s, netperf TCP_CRR %.0f /s, ratio %.3f (target >= 1.0)"
      % (med(b_cps), med(n_crr), med([a / b for a, b in zip(b_cps, n_crr)])))
print("    netblast connect latency p50 %.1f us; failed connections %d in all" % (med(b_conn), sum(b_fail)))
def cost(name, rate):
    c, s, window = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return c / (rate * window) * 1e6, s / (rate * window) * 1e6
def costs(label, nbname, npname, nbrate, nprate):
    b = [cost("%s-%d" % (nbname, r), nbrate[r - 1]) for r in R]
    n = [cost("%s-%d" % (npname, r), nprate[r - 1]) for r in R]
    for side, k in (("client", 0), ("server", 1)):
        print("    %s CPU per %s (busy time of its pinned CPU over the middle of the run): netblast %.2f us, netperf %.2f us, ratio %.3f (target <= 1.0)"
              % (side, label, med([x[k] for x in b]), med([x[k] for x in n]), med([x[k] / y[k] for x, y in zip(b, n)])))
costs("connection", "bcps", "ncrr", b_cps, n_crr)
b_cpsd = [nb("bcpsd-%d" % r)["msgs"]["sent_per_s"] for r in R]
print("connections/s with --close fin (the client closes first and keeps the TIME_WAIT): netblast %.0f /s, against netperf TCP_CRR: ratio %.3f"
      % (med(b_cpsd), med([a / b for a, b in zip(b_cpsd, n_crr)])))
costs("connection with --close fin", "bcpsd", "ncrr", b_cpsd, n_crr)
print("transactions/s (1-byte TCP request/response, blocking): netblast %.0f /s, netperf TCP_RR %.0f /s, ratio %.3f (target >= 1.0)"
      % (med(b_rr), med(n_rr), med([a / b for a, b in zip(b_rr, n_rr)])))
costs("transaction", "brr", "nrr", b_rr, n_rr)
PY
