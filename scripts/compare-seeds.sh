#!/usr/bin/env bash
# The seeds' own HTTP commands beside netblast's, against one local nginx
# (scripts/nginx-local.sh), each pair interleaved, so a reader sees the tools agree on what they
# measure: requests/s and latency percentiles side by side.
#   - hey -c 250 -n 10000 (the AKS seed's closed loop) vs netblast run -c 250 -n 10000;
#   - vegeta attack -rate 50 for SECONDS of a 1 MiB file (the firewall seed's open loop) vs
#     netblast's http-rate-50-1mib profile at the same length.
# hey and vegeta: scripts/anchors-build.sh installs them (go install).
#
#   scripts/compare-seeds.sh [ROUNDS] [SECONDS]      (defaults: 3 rounds; vegeta runs of 10 s)
set -euo pipefail
ROUNDS=${1:-3}
SECS=${2:-10}
cd "$(dirname "$0")/.."
GOBIN_DIR=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin
PATH="$PATH:$GOBIN_DIR"
for t in hey vegeta nginx; do
  command -v "$t" >/dev/null || { echo "$t is not installed (scripts/anchors-build.sh; nginx: apt-get install nginx)" >&2; exit 2; }
done
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
chmod 755 "$WORK"
HTTP_PORT=${HTTP_PORT:-18184}
HTTPS_PORT=${HTTPS_PORT:-18547}
NGINX=
trap 'kill $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=scripts/nginx-count.sh
. scripts/nginx-count.sh
nginx_up
BIG="http://127.0.0.1:$HTTP_PORT/1mib"
hey_run() { hey -c 250 -n 10000 -o csv "$URL" >"$WORK/hey-$1.csv"; }
nb_hey() { "$NB" run --url "$URL" -c 250 -n 10000 --probe off --json >"$WORK/nbhey-$1.json"; }
veg_run() {
  echo "GET $BIG" | vegeta attack -rate 50 -duration "${SECS}s" -max-body 0 >"$WORK/veg-$1.bin"
  vegeta report -type json <"$WORK/veg-$1.bin" >"$WORK/veg-$1.json"
}
nb_veg() { "$NB" run --url "$BIG" --profile http-rate-50-1mib -t "$SECS" --probe off --json >"$WORK/nbveg-$1.json"; }
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then hey_run "$r"; nb_hey "$r"; veg_run "$r"; nb_veg "$r"
  else nb_hey "$r"; hey_run "$r"; nb_veg "$r"; veg_run "$r"; fi
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK" "$ROUNDS" "$SECS" <<'PY'
import csv, json, os, statistics, sys
work, rounds, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
med = statistics.median
def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]
def hey(r):
    rows = list(csv.DictReader(open(os.path.join(work, "hey-%d.csv" % r))))
    if len(rows) != 10000 or any(row["status-code"] != "200" for row in rows):
        sys.exit("hey round %d: %d answers, statuses %s" % (r, len(rows), {row["status-code"] for row in rows}))
    lat = [float(row["response-time"]) * 1e3 for row in rows]
    span = max(float(row["offset"]) + float(row["response-time"]) for row in rows)
    return {"rps": len(rows) / span, "p50": pct(lat, 0.5), "p90": pct(lat, 0.9), "p99": pct(lat, 0.99)}
def vegeta(r):
    d = json.load(open(os.path.join(work, "veg-%d.json" % r)))
    if d["success"] != 1.0:
        sys.exit("vegeta round %d: success %s, errors %s" % (r, d["success"], d.get("errors")))
    l = d["latencies"]
    return {"rps": d["throughput"], "p50": l["50th"] / 1e6, "p90": l["90th"] / 1e6, "p99": l["99th"] / 1e6,
            "bytes": d["bytes_in"]["total"]}
def nb(name):
    d = json.load(open(os.path.join(work, name + ".json")))
    h = d["summary"]["http"]
    if h["errors"] or set(h["status_codes"]) != {"200"}:
        sys.exit("netblast %s: errors %s, statuses %s" % (name, h["errors"], h["status_codes"]))
    l = h["latency"]
    return {"rps": h["responses_per_s"], "p50": l["p50_ns"] / 1e6, "p90": l["p90_ns"] / 1e6, "p99": l["p99_ns"] / 1e6,
            "n": h["completed"], "bytes": h.get("bytes_received", 0)}
def line(tool, xs):
    return "    %-8s %8.0f req/s   p50 %7.2f ms   p90 %7.2f ms   p99 %7.2f ms" % (
        tool, med(x["rps"] for x in xs), med(x["p50"] for x in xs), med(x["p90"] for x in xs), med(x["p99"] for x in xs))
R = range(1, rounds + 1)
a, b = [hey(r) for r in R], [nb("nbhey-%d" % r) for r in R]
if any(x["n"] != 10000 for x in b):
    sys.exit("netblast -n 10000 answered %s" % [x["n"] for x in b])
print("the AKS seed's closed loop, 250 connections, 10000 requests of a 45-byte page, %d rounds, medians:" % rounds)
print(line("hey", a)); print(line("netblast", b))
print("    requests/s, netblast/hey: ratio %.3f" % med(y["rps"] / x["rps"] for x, y in zip(a, b)))
a, b = [vegeta(r) for r in R], [nb("nbveg-%d" % r) for r in R]
print("the firewall seed's open loop, 50 requests/s of 1 MiB for %g s, %d rounds, medians:" % (secs, rounds))
print(line("vegeta", a)); print(line("netblast", b))
print("    p50 latency, netblast/vegeta: ratio %.3f (the same requests at the same rate: ~1.0)"
      % med(y["p50"] / x["p50"] for x, y in zip(a, b)))
PY
