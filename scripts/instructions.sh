#!/usr/bin/env bash
# User-space instructions per operation of each client, netblast's and the tool's beside it,
# counted by valgrind's callgrind: a figure that repeats to the instruction where CPU time on a
# shared box does not, for the part of the cost a tool's own code decides (the kernel's share is
# the system calls, counted apart by the compare-*.sh scripts' CPU time).
#
# Each client runs twice under callgrind, SHORT and LONG seconds; the cost of one more
# operation is (instructions of the long run - of the short) / (operations of the long run -
# of the short), so start-up and teardown cancel out. Servers run natively.
#   - HTTP/1.1: `netblast run --url` vs `wrk`, 10 connections, against a local nginx
#     (scripts/nginx-local.sh), the same request bytes; per response;
#   - request/response: `netblast --profile latency --wait block -P 1` vs `netperf -t TCP_RR --
#     -r 1,1` (when installed), per transaction;
#   - connections: `netblast --profile cps -P 1 --close server` vs `netperf -t TCP_CRR -- -r
#     1,1` (when installed), per connection;
#   - UDP: `netblast -u -b 100M -l 1400` vs `iperf3 -u -b 100M -l 1400`, per datagram sent;
#   - bulk TCP: `netblast -l 1MiB` vs `iperf3 -l 1M`, per GB sent (1 flow).
# netblast (client and server) runs with --probe off (the others read no kernel statistics) and one interval report
# per run (-i as long as the run): its reports are a cost per second, not per operation, and
# under valgrind's slower pace they would weigh on each operation several times what they do
# at full speed.
#
#   scripts/instructions.sh [SHORT] [LONG]      (defaults: 1 and 3 seconds)
set -euo pipefail
SHORT=${1:-1}
LONG=${2:-3}
cd "$(dirname "$0")/.."
awk -v s="$SHORT" -v l="$LONG" 'BEGIN { exit !(l > s) }' || { echo "LONG ($LONG) must be longer than SHORT ($SHORT)" >&2; exit 2; }
for t in valgrind callgrind_annotate; do
  command -v "$t" >/dev/null || { echo "$t is not installed (apt-get install valgrind)" >&2; exit 2; }
done
cargo build --release -q -p netblast
NB=$PWD/target/release/netblast
WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx's workers (user nobody) must reach the files it serves
HTTP_PORT=${HTTP_PORT:-18280}
HTTPS_PORT=${HTTPS_PORT:-18643}
PORT_NB=${PORT_NB:-15290}
PORT_IP=${PORT_IP:-15291}
PORT_NP=${PORT_NP:-19867}
SERVERS=()
cleanup() { kill "${SERVERS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

"$NB" serve --bind 127.0.0.1 --port "$PORT_NB" --probe off 2>"$WORK/nb-serve.log" &
SERVERS+=($!)
if command -v iperf3 >/dev/null; then
  iperf3 -s -B 127.0.0.1 -p "$PORT_IP" >/dev/null 2>&1 &
  SERVERS+=($!)
fi
if command -v netserver >/dev/null; then
  netserver -D -L 127.0.0.1 -p "$PORT_NP" >/dev/null 2>&1 &
  SERVERS+=($!)
fi
if command -v nginx >/dev/null && command -v wrk >/dev/null; then
  scripts/nginx-local.sh "$WORK/nginx" "$HTTP_PORT" "$HTTPS_PORT" >"$WORK/nginx.out" 2>&1 &
  SERVERS+=($!)
  for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && break
    sleep 0.1
  done
fi
sleep 0.5

# Runs CMD under callgrind; prints the instructions it executed (all threads).
instructions() { # name cmd...
  local name=$1; shift
  valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.cg" "$@" >"$WORK/$name.out" 2>"$WORK/$name.vg" \
    || { echo "$name failed under valgrind: $*" >&2; tail -5 "$WORK/$name.vg" >&2; exit 1; }
  awk '/^summary:/ { print $2 }' "$WORK/$name.cg"
}
# The operations a run did, from its output.
ops_nb() { # name what: http (responses) | sent (messages) | gb (GB sent)
  python3 - "$WORK/$1.out" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
if not d["complete"]:
    sys.exit("netblast run incomplete: %s" % d["errors"])
s = d["summary"]
what = sys.argv[2]
if what == "http":
    print(s["http"]["completed"])
elif what == "gb":
    print(sum(w["sender"]["bytes"] for w in s["ways"]) / 1e9)
else:
    print(s["ways"][0]["msgs"]["sent"])
PY
}
ops_wrk() { awk '/requests in/ { print $1 }' "$WORK/$1.out"; }
ops_netperf() { awk -F, 'NF == 2 && $1 + 0 > 0 { printf "%.0f\n", $1 * $2 }' "$WORK/$1.out"; }
ops_iperf3() { # name what: packets | gb
  python3 -c 'import json,sys; e = json.load(open(sys.argv[1]))["end"]
print(e["sum"]["packets"] if sys.argv[2] == "packets" else e["sum_sent"]["bytes"] / 1e9)' "$WORK/$1.out" "$2"
}

# Prints "I_PER_OP" for one client: NAME OPS_FN OPS_ARG SECONDS_FLAG... (cmd with @S@ for seconds)
per_op() { # name ops-fn ops-arg cmd-with-@S@...
  local name=$1 fn=$2 arg=$3; shift 3
  local i1 i2 n1 n2
  i1=$(instructions "$name-s" "${@//@S@/$SHORT}"); n1=$("$fn" "$name-s" "$arg")
  i2=$(instructions "$name-l" "${@//@S@/$LONG}"); n2=$("$fn" "$name-l" "$arg")
  python3 -c 'import sys; i1,i2,n1,n2 = map(float, sys.argv[1:]); print("%.0f" % ((i2 - i1) / (n2 - n1)) if n2 > n1 else "nan")' \
    "$i1" "$i2" "$n1" "$n2"
}
line() { # what per nb other other-name
  python3 -c 'import sys; w, p, a, b, t = sys.argv[1:]; a, b = float(a), float(b)
print("user-space instructions per %s, %s: netblast %.0f, %s %.0f, ratio %.3f (target <= 1.0)" % (p, w, a, t, b, a / b))' "$@"
}

echo "user-space instructions per operation of each client (callgrind; runs of $SHORT s and $LONG s, the difference per operation)"
echo "(the kernel's part, the system calls, is in the compare-*.sh scripts' CPU time)"
if [ -e "$WORK/nginx.out" ]; then
  UA="user-agent: $("$NB" --version | tr ' ' '/')"
  URL="http://127.0.0.1:$HTTP_PORT/"
  a=$(per_op nb-http ops_nb http "$NB" run --url "$URL" -c 10 -t @S@ -i @S@ --probe off --json)
  b=$(per_op wrk-http ops_wrk - wrk -t 2 -c 10 -d @S@s -H "$UA" "$URL")
  line "HTTP/1.1, 10 connections" response "$a" "$b" wrk
else
  echo "HTTP: skipped (nginx or wrk not installed)"
fi
if command -v netperf >/dev/null; then
  a=$(per_op nb-rr ops_nb sent "$NB" run --target "127.0.0.1:$PORT_NB" --profile latency --wait block -P 1 -t @S@ -i @S@ --probe off --json)
  b=$(per_op np-rr ops_netperf - netperf -H 127.0.0.1 -p "$PORT_NP" -t TCP_RR -l @S@ -P 0 -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME)
  line "1-byte TCP request/response, blocking" transaction "$a" "$b" netperf
  a=$(per_op nb-cps ops_nb sent "$NB" run --target "127.0.0.1:$PORT_NB" --profile cps -P 1 --close server -t @S@ -i @S@ --probe off --json)
  b=$(per_op np-crr ops_netperf - netperf -H 127.0.0.1 -p "$PORT_NP" -t TCP_CRR -l @S@ -P 0 -- -r 1,1 -o THROUGHPUT,ELAPSED_TIME)
  line "connect, 1-byte request and response, the server closes first" connection "$a" "$b" netperf
else
  echo "request/response: skipped (netperf not installed; scripts/compare-netperf.sh adds it)"
fi
if command -v iperf3 >/dev/null; then
  a=$(per_op nb-udp ops_nb sent "$NB" run --target "127.0.0.1:$PORT_NB" -u -b 100M -l 1400 -t @S@ -i @S@ --probe off --json)
  b=$(per_op ip-udp ops_iperf3 packets iperf3 -c 127.0.0.1 -p "$PORT_IP" -u -b 100M -l 1400 -t @S@ -J)
  line "UDP at 100 Mbit/s, 1400-byte datagrams" "datagram sent" "$a" "$b" iperf3
  a=$(per_op nb-bulk ops_nb gb "$NB" run --target "127.0.0.1:$PORT_NB" -l 1MiB -t @S@ -i @S@ --probe off --json)
  b=$(per_op ip-bulk ops_iperf3 gb iperf3 -c 127.0.0.1 -p "$PORT_IP" -l 1M -t @S@ -J)
  line "bulk TCP, 1 flow, 1 MiB sends" "GB sent" "$a" "$b" iperf3
else
  echo "UDP: skipped (iperf3 not installed)"
fi
