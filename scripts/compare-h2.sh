#!/usr/bin/env bash
# HTTP/2 over TLS: netblast against h2load (nghttp2's load tool) on the same local nginx
# (scripts/nginx-local.sh), the same connections and streams per connection, one client thread
# each (-t 1: netblast's HTTP client runs on one runtime thread per CPU it is given; both are
# pinned to CPU 0, nginx gets the rest), interleaved rounds, medians: requests/s as nginx
# counts them, the ratio (target >= 1.0), and each client's CPU per response.
#
#   scripts/compare-h2.sh [ROUNDS] [SECONDS] [CONNECTIONS] [STREAMS]   (defaults: 5, 5, 4, 32)
set -euo pipefail
ROUNDS=${1:-5}
SECS=${2:-5}
CONNS=${3:-4}
STREAMS=${4:-32}
cd "$(dirname "$0")/.."
command -v h2load >/dev/null || { echo "h2load is not installed (apt-get install nghttp2-client)" >&2; exit 2; }
command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install nginx)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx's workers (user nobody) must reach the files it serves
HTTP_PORT=${HTTP_PORT:-18182}
HTTPS_PORT=${HTTPS_PORT:-18545}
NGINX=
trap 'kill $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=scripts/nginx-count.sh
. scripts/nginx-count.sh
nginx_up
H2URL="https://127.0.0.1:$HTTPS_PORT/"
run_h2load() { measured "h2load-$1" sh -c "taskset -c 0 h2load -c $CONNS -m $STREAMS -t 1 -D $SECS $H2URL >$WORK/h2load-$1.txt"; }
run_nb() { measured "nb-$1" sh -c "taskset -c 0 $NB run --url $H2URL --insecure --http2 --profile http-max -c $CONNS -m $STREAMS -t $SECS --probe off --json >$WORK/nb-$1.json"; }
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then run_h2load "$r"; run_nb "$r"; else run_nb "$r"; run_h2load "$r"; fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK" "$ROUNDS" "$SECS" "$CONNS" "$STREAMS" <<'PY'
import json, os, re, statistics, sys
work, rounds, secs, conns, streams = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
def h2load(r):
    t = open(os.path.join(work, "h2load-%d.txt" % r)).read()
    m = re.search(r"requests: \d+ total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", t)
    if not m or int(m.group(3)) or int(m.group(4)):
        sys.exit("h2load failed or had errors:\n" + t)
    if not re.search(r"Application protocol: h2", t):
        sys.exit("h2load did not speak h2:\n" + t)
    return int(m.group(2))
def nb(r):
    d = json.load(open(os.path.join(work, "nb-%d.json" % r)))
    h = d["summary"]["http"]
    if h["completed"] == 0 or h["errors"] or set(h["status_codes"]) != {"200"}:
        sys.exit("netblast run %d: errors %s, statuses %s" % (r, h["errors"], h["status_codes"]))
    return h["completed"]
def cost(name):
    client, server = map(float, open(os.path.join(work, name + ".cost")).read().split())
    return client, int(open(os.path.join(work, name + ".handled")).read()), server
R = range(1, rounds + 1)
for r in R:
    h2load(r), nb(r)
med = statistics.median
hc = [cost("h2load-%d" % r) for r in R]
nc = [cost("nb-%d" % r) for r in R]
print("HTTP/2 over TLS, netblast vs h2load against one local nginx, %d rounds x %g s, -c %s -m %s, clients on CPU 0"
      % (rounds, secs, conns, streams))
print("requests/s counted by nginx: netblast %.0f, h2load %.0f, netblast/h2load: ratio %.3f (target >= 1.0)"
      % (med(c[1] for c in nc) / secs, med(c[1] for c in hc) / secs, med(a[1] / b[1] for a, b in zip(nc, hc))))
print("    per round: " + " ".join("%.3f" % (a[1] / b[1]) for a, b in zip(nc, hc)))
print("client CPU per response, h2: netblast %.2f us, h2load %.2f us, ratio %.3f (target <= 1.0)"
      % (med(c[0] / c[1] * 1e6 for c in nc), med(c[0] / c[1] * 1e6 for c in hc),
         med((a[0] / a[1]) / (b[0] / b[1]) for a, b in zip(nc, hc))))
PY
