#!/usr/bin/env bash
# Replays the attacks of issues 13 and 24 against a fresh `netblast serve` on loopback, one at a
# time, each bounded in time, from 127.0.0.2 (another "host"): on the data port, on the HTTP
# responder (HTTP/1.1 and h2c: rapid reset, CONTINUATION flood, HPACK bomb, zero window,
# SETTINGS and PING floods) and on its HTTPS port (handshake flood, half-open TLS). Beside every
# attack a well-behaved client on 127.0.0.1 runs a short test of each (a data-port test, an
# HTTP/1.1 test, an HTTP/2-over-TLS test); the table says whether all three completed, the
# serve's peak resident memory during the attack, and its resident memory and open descriptors
# once the attack let go.
#
#   scripts/abuse.sh [HOLD_SECONDS]     # how long each attack holds what it took (default 6)
#
# After every attack the serve's memory must be back within 50 MB of its start, and at the end
# its descriptors at their start count, or the script exits 1 (so does any well-behaved client
# that failed).
set -euo pipefail
cd "$(dirname "$0")/.."
HOLD=${1:-6}

cargo build --release -q -p netblast -p netblast-benches --bin netblast --bin netblast-abuse
NB=target/release/netblast
ABUSE=target/release/netblast-abuse
LOG=$(mktemp)
WORK=$(mktemp -d)
"$NB" serve --bind 127.0.0.1 --port 0 --http 0 --https 0 --probe tcpinfo 2>"$LOG" &
SERVE=$!
cleanup() { kill "$SERVE" 2>/dev/null || true; wait "$SERVE" 2>/dev/null || true; rm -rf "$LOG" "$WORK"; }
trap cleanup EXIT
for _ in $(seq 1 50); do
  DATA=$(sed -n 's/.*listening on \([^ ]*\) .*/\1/p' "$LOG")
  HTTP=$(sed -n 's/.*HTTP (HTTP\/1.1, h2c) on \([^ ,]*\).*/\1/p' "$LOG")
  HTTPS=$(sed -n 's/.*HTTPS (HTTP\/1.1, h2) on \([^ ,]*\).*/\1/p' "$LOG")
  [ -n "$DATA" ] && [ -n "$HTTP" ] && [ -n "$HTTPS" ] && break
  sleep 0.1
done
if [ -z "${DATA:-}" ] || [ -z "${HTTP:-}" ] || [ -z "${HTTPS:-}" ]; then echo "abuse.sh: serve did not start" >&2; cat "$LOG" >&2; exit 1; fi

rss_mb() { awk '/VmRSS/ {printf "%.1f", $2 / 1024}' "/proc/$SERVE/status"; }
peak_mb() { awk '/VmHWM/ {printf "%.1f", $2 / 1024}' "/proc/$SERVE/status"; }
reset_peak() { echo 5 > "/proc/$SERVE/clear_refs" 2>/dev/null || true; }  # VmHWM from now on
fds() { find "/proc/$SERVE/fd" -mindepth 1 -maxdepth 1 | wc -l; }
normal() {  # well-behaved data-port, HTTP/1.1 and h2-over-TLS clients; prints "ok ok ok" or what failed
  local d h s
  if "$NB" run --target "$DATA" -t 2 --probe tcpinfo --json > "$WORK/d.json" 2>"$WORK/d.err"; then d=ok; else d=FAIL; fi
  if "$NB" run --profile http-max --url "http://$HTTP/" -c 4 -t 2 --probe tcpinfo --json > "$WORK/h.json" 2>"$WORK/h.err"; then h=ok; else h=FAIL; fi
  if "$NB" run --profile http-max --url "https://$HTTPS/" --http2 -k -c 2 -t 2 --probe tcpinfo --json > "$WORK/s.json" 2>"$WORK/s.err"; then s=ok; else s=FAIL; fi
  echo "$d $h $s"
}
why() {  # what a failed well-behaved client said
  local f
  for f in d h s; do
    [ -s "$WORK/$f.err" ] && grep -v '^\s*$' "$WORK/$f.err" | tail -n 1 | cut -c1-160 | sed "s/^/  [$f] /"
  done
  return 0
}
settle() {  # waits (up to 30 s) for the serve's descriptors to come back to $1 and its memory within 50 MB of $2
  for _ in $(seq 1 60); do
    [ "$(fds)" -le "$1" ] && awk -v a="$(rss_mb)" -v b="$2" 'BEGIN { exit !(a - b <= 50) }' && return 0
    sleep 0.5
  done
  return 0
}

normal > /dev/null  # the first test sets up what stays (runtime threads, buffers)
START_RSS=$(rss_mb)
START_FDS=$(fds)
printf 'serve on %s (HTTP %s, HTTPS %s): %s MB resident, %s descriptors\n\n' "$DATA" "$HTTP" "$HTTPS" "$START_RSS" "$START_FDS"
printf '%-18s %-4s %-4s %-5s %8s %8s %5s  %s\n' attack data http https "peak MB" "after MB" fds "what the attack did"
FAILED=0
row() {
  local name=$1 verdict=$2 what=$3
  settle "$START_FDS" "$START_RSS"
  local d h s after
  read -r d h s <<< "$verdict"
  after=$(rss_mb)
  printf '%-18s %-4s %-4s %-5s %8s %8s %5s  %s\n' "$name" "$d" "$h" "$s" "$(peak_mb)" "$after" "$(fds)" "$what"
  case "$verdict" in *FAIL*) FAILED=1; why ;; esac
  if awk -v a="$after" -v b="$START_RSS" 'BEGIN { exit !(a - b > 50) }'; then
    echo "  memory not back within 50 MB of the start ($START_RSS MB) after $name"; FAILED=1
  fi
}
attack() {  # NAME ATTACK [ARGS...]: the attack in the background, well-behaved clients beside it
  local name=$1 what=$2; shift 2
  reset_peak
  "$ABUSE" "$what" --data "$DATA" --http "$HTTP" --https "$HTTPS" --hold "$HOLD" "$@" > "$WORK/a.out" 2>&1 &
  local pid=$!
  sleep 1.5
  local verdict; verdict=$(normal)
  wait "$pid" || true
  row "$name" "$verdict" "$(tr '\n' ' ' < "$WORK/a.out" | cut -c1-220)"
}

attack pending pending
attack pending-streams pending-streams
attack rr-silent rr-silent
attack no-read no-read
attack spin spin
attack idle-data idle-data --count 10000
attack garbage garbage
attack partial-http partial-http --count 10000
attack keepalive-http keepalive-http --count 10000
attack h2-rapid-reset h2-rapid-reset
attack h2-continuation h2-continuation
attack h2-hpack-bomb h2-hpack-bomb
attack h2-zero-window h2-zero-window --count 100
attack h2-settings-flood h2-settings-flood
attack h2-ping-flood h2-ping-flood
attack tls-flood tls-flood --count 4
# Held past the responder's 15 s header timeout, to see the server close them by itself.
attack tls-half-open tls-half-open --count 10000 --hold 17
# Thousands of flows at 10 ms intervals: a client that used to livelock both ends.
reset_peak
T0=$(date +%s.%N)
"$NB" run --target "$DATA" --flows 8000 -i 10ms -t 2 --probe tcpinfo --json > "$WORK/big.json" 2>"$WORK/big.err" &
BIG=$!
sleep 1.5
VERDICT=$(normal)
if wait "$BIG"; then BIGV="exit 0"; else BIGV="exit $?"; fi
BIGV="8000 flows at 10 ms, -t 2: $BIGV after $(awk -v a="$T0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
row flows-8000 "$VERDICT" "$BIGV"

END_RSS=$(rss_mb)
END_FDS=$(fds)
printf '\nserve after every attack: %s MB resident (started at %s), %s descriptors (started at %s)\n' \
  "$END_RSS" "$START_RSS" "$END_FDS" "$START_FDS"
if awk -v a="$END_RSS" -v b="$START_RSS" 'BEGIN { exit !(a - b > 50) }'; then
  echo "abuse.sh: FAIL: memory grew by more than 50 MB"; FAILED=1
fi
if [ "$END_FDS" -gt "$START_FDS" ]; then
  echo "abuse.sh: FAIL: descriptors leaked"; FAILED=1
fi
if [ "$FAILED" = 0 ]; then echo "abuse.sh: every well-behaved client completed; serve recovered"; fi
exit "$FAILED"
