#!/usr/bin/env bash
# The floor under an HTTP/1.1 keep-alive flood on one host: a minimal C client (scripts/floor/
# http.c: epoll, a fixed GET per connection in a closed loop, responses counted by length,
# nothing else) in two patterns beside wrk and netblast, against one local nginx
# (scripts/nginx-local.sh), the same connections split over one process or thread per CPU,
# interleaved rounds; prints each one's requests/s as nginx counts them, its ratio to wrk in
# the same round, and its client and nginx CPU per request.
#   - minimal et:  edge-triggered, the next request written as soon as the response is read
#     (netblast's system calls: one read, one write per request);
#   - minimal wrk: level-triggered, the request written on the next epoll_wait after the
#     connection asked for EPOLLOUT (wrk's: two epoll_ctl calls more per request).
# What it shows on a host: whether netblast's figure against wrk is its code's or the pattern's
# (the client shares the CPUs with nginx, so how requests reach nginx moves nginx's cost too).
#
#   scripts/floor-http.sh [ROUNDS] [SECONDS] [CONNECTIONS]    (defaults: 9 rounds, 3 s, 50)
set -euo pipefail
ROUNDS=${1:-9}
SECS=${2:-3}
CONNS=${3:-50}
cd "$(dirname "$0")/.."
command -v wrk >/dev/null || { echo "wrk is not installed (apt-get install wrk)" >&2; exit 2; }
command -v cc >/dev/null || { echo "no C compiler (apt-get install build-essential)" >&2; exit 2; }
cargo build --release -q -p netblast
NB=target/release/netblast
WORK=$(mktemp -d)
chmod 755 "$WORK" # nginx's workers (user nobody) must reach the files it serves
cc -O2 -o "$WORK/http" scripts/floor/http.c
HTTP_PORT=${HTTP_PORT:-18190}
HTTPS_PORT=${HTTPS_PORT:-18553}
NCPU=$(nproc)
NGINX=
trap 'kill $NGINX 2>/dev/null || true; wait $NGINX 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck source=scripts/nginx-count.sh
. scripts/nginx-count.sh
nginx_up
UA="user-agent: $("$NB" --version | tr ' ' '/')"
export UA
# One process per CPU, the connections split between them, as wrk's threads and netblast's workers.
minimal() { # mode
  local i per=$(( CONNS / NCPU )) rest=$(( CONNS % NCPU ))
  for i in $(seq 1 "$NCPU"); do
    "$WORK/http" "$HTTP_PORT" $(( per + (i <= rest ? 1 : 0) )) "$SECS" "$1" >/dev/null &
  done
  wait
}
export -f minimal
export WORK HTTP_PORT CONNS NCPU SECS
run() { # name round
  case $1 in
    wrk) measured "wrk-$2" wrk -t "$NCPU" -c "$CONNS" -d "${SECS}s" -H "$UA" "$URL" >/dev/null ;;
    nb) measured "nb-$2" "$NB" run --url "$URL" --profile http-max -c "$CONNS" -t "$SECS" --probe off --json >/dev/null ;;
    et|wrkstyle) measured "$1-$2" bash -c "minimal ${1/style/}" ;;
  esac
}
for r in $(seq 1 "$ROUNDS"); do
  if (( r % 2 )); then order="wrk nb et wrkstyle"; else order="wrkstyle et nb wrk"; fi
  for t in $order; do run "$t" "$r"; done
  echo "round $r/$ROUNDS done" >&2
done
python3 - "$WORK" "$ROUNDS" "$SECS" "$CONNS" <<'PY'
import os, statistics, sys
work, rounds, secs, conns = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
med = statistics.median
R = range(1, rounds + 1)
def cost(name):
    client, server = map(float, open(os.path.join(work, name + ".cost")).read().split())
    n = int(open(os.path.join(work, name + ".handled")).read())
    if n <= 0:
        sys.exit("nginx handled no request during %s" % name)
    return n, client / n * 1e6, server / n * 1e6
w = [cost("wrk-%d" % r) for r in R]
print("wrk, netblast and a minimal C client against one local nginx, %d rounds x %g s, %s connections, %d CPUs shared"
      % (rounds, secs, conns, os.cpu_count()))
print("(requests/s counted by nginx; ratio: to wrk in the same round; CPU per request: the client's, nginx's)")
for label, tag in (("wrk", "wrk"), ("netblast", "nb"), ("minimal et", "et"), ("minimal wrk", "wrkstyle")):
    c = [cost("%s-%d" % (tag, r)) for r in R]
    print("    %-12s %7.0f /s  ratio %.3f   client %.2f us (%.3f)   nginx %.2f us (%.3f)"
          % (label, med([x[0] for x in c]) / secs, med([x[0] / y[0] for x, y in zip(c, w)]),
             med([x[1] for x in c]), med([x[1] / y[1] for x, y in zip(c, w)]),
             med([x[2] for x in c]), med([x[2] / y[2] for x, y in zip(c, w)])))
PY
