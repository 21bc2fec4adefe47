#!/usr/bin/env bash
# Runs netblast and wrk back to back against the same local nginx (scripts/nginx-local.sh):
# same connections, same duration, the same request bytes (wrk sends netblast's user-agent
# header too), a small static response, interleaved rounds, and prints the median requests/s
# ratio; then netblast's HTTPS requests/s against the same nginx.
#
#   scripts/compare-http.sh [ROUNDS] [SECONDS] [CONNECTIONS]    (defaults: 5 rounds, 5 s, 50)
#
# Client and server share this machine's CPUs: a client that costs less CPU leaves more to
# nginx, so the ratio compares the tools' efficiency as much as their speed.
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CONNS=${3:-50}
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx's workers (user nobody) must reach the files it serves
HTTP_PORT=${HTTP_PORT:-18180}
HTTPS_PORT=${HTTPS_PORT:-18543}
NCPU=$(nproc)
NGINX=
trap 'kill $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=scripts/nginx-count.sh
. scripts/nginx-count.sh
nginx_up
# The same request on the wire: wrk sends "Host" only unless told; netblast adds its user-agent.
UA="user-agent: $("$NB" --version | tr ' ' '/')"
run_wrk() { measured "wrk-$1" sh -c "wrk -t $NCPU -c $CONNS -d ${SECS}s -H '$UA' $URL >$WORK/wrk-$1.txt"; }
# --probe off: wrk reads no kernel statistics; the probe's own cost is scripts/probe-overhead.sh's.
run_nb() { measured "nb-$1" sh -c "$NB run --url $URL --profile http-max -c $CONNS -t $SECS --probe off --json >$WORK/nb-$1.json"; }
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then run_wrk "$r"; run_nb "$r"; else run_nb "$r"; run_wrk "$r"; fi
  echo "round $r/$ROUNDS done" >&2
done
"$NB" run --url "https://127.0.0.1:$HTTPS_PORT/" --insecure --profile http-max -c "$CONNS" -t "$SECS" --json >"$WORK/nb-tls.json"
"$NB" run --url "https://127.0.0.1:$HTTPS_PORT/" --insecure --http2 --profile http-max -c "$CONNS" -t "$SECS" --json >"$WORK/nb-h2.json"
"$NB" run --url "https://127.0.0.1:$HTTPS_PORT/" --insecure --http2 --profile http-max -c 4 -m 16 -t "$SECS" --json >"$WORK/nb-h2m.json"
python3 - "$WORK" "$ROUNDS" "$SECS" "$CONNS" <<'PY'
import json, os, re, statistics, sys
work, rounds, secs, conns = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
def wrk(r):
    t = open(os.path.join(work, "wrk-%d.txt" % r)).read()
    m = re.search(r"Requests/sec:\s+([\d.]+)", t)
    if not m:
        sys.exit("no Requests/sec in wrk output:\n" + t)
    if "Non-2xx" in t:
        sys.exit("wrk got error statuses:\n" + t)
    return float(m.group(1))
def nb(name):
    d = json.load(open(os.path.join(work, "nb-%s.json" % name)))
    h = d["summary"]["http"]
    if h["completed"] == 0 or h["errors"]:
        sys.exit("netblast run %s had errors: %s" % (name, h["errors"]))
    if set(h["status_codes"]) != {"200"}:
        sys.exit("netblast run %s got statuses other than 200: %s" % (name, h["status_codes"]))
    return h
R = range(1, rounds + 1)
def cost(name):
    # client CPU s, requests nginx handled, nginx CPU s
    client, server = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return client, int(open(os.path.join(work, name + ".handled")).read()), server
med = statistics.median
w = [wrk(r) for r in R]
n = [nb(str(r))["responses_per_s"] for r in R]
wc = [cost("wrk-%d" % r) for r in R]
nc = [cost("nb-%d" % r) for r in R]
print("netblast vs wrk against one local nginx, %d rounds x %s s, %s connections, %d CPUs shared by client and nginx"
      % (rounds, secs, conns, os.cpu_count()))
print("(netblast with --probe off, as wrk reads no kernel TCP statistics)")
print("requests/s counted by nginx: netblast %.0f, wrk %.0f, ratio %.3f (target >= 1.0)"
      % (med([c[1] for c in nc]) / float(secs), med([c[1] for c in wc]) / float(secs),
         med([a[1] / b[1] for a, b in zip(nc, wc)])))
print("    per round (netblast/wrk): " + " ".join("%.3f" % (a[1] / b[1]) for a, b in zip(nc, wc)))
print("requests/s as each client counts them: netblast %.0f, wrk %.0f" % (med(n), med(w)))
print("client CPU per request: netblast %.2f us, wrk %.2f us, ratio %.3f (target <= 1.0)"
      % (med([c[0] / c[1] * 1e6 for c in nc]), med([c[0] / c[1] * 1e6 for c in wc]),
         med([(a[0] / a[1]) / (b[0] / b[1]) for a, b in zip(nc, wc)])))
print("nginx CPU per request: under netblast %.2f us, under wrk %.2f us"
      % (med([c[2] / c[1] * 1e6 for c in nc]), med([c[2] / c[1] * 1e6 for c in wc])))
tls, h2, h2m = nb("tls"), nb("h2"), nb("h2m")
print("netblast HTTPS (TLS 1.3, HTTP/1.1) against the same nginx: %.0f requests/s, p99 %.2f ms"
      % (tls["responses_per_s"], tls["latency"]["p99_ns"] / 1e6))
print("netblast HTTPS h2 (one stream per connection): %.0f requests/s, p99 %.2f ms"
      % (h2["responses_per_s"], h2["latency"]["p99_ns"] / 1e6))
print("netblast HTTPS h2, 4 connections x 16 streams: %.0f requests/s, p99 %.2f ms"
      % (h2m["responses_per_s"], h2m["latency"]["p99_ns"] / 1e6))
PY
