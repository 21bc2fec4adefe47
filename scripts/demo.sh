#!/usr/bin/env bash
# The main job on one machine: starts a local `netblast serve`, runs a profile against it
# (default bulk-1flow; pass another profile name and any `netblast run` flags), stops the server.
#
#   scripts/demo.sh                      # bulk-1flow, 10 s
#   scripts/demo.sh bulk-64flows --json  # any profile and flags
set -euo pipefail
cd "$(dirname "$0")/.."
NB=target/release/netblast
cargo build --release -q -p netblast # a no-op when the binary is current
PROFILE=${1:-bulk-1flow}
shift || true
LOG=$(mktemp)
"$NB" serve --bind 127.0.0.1 --port 0 2>"$LOG" &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 50); do
  ADDR=$(sed -n 's/.*listening on \([^ ]*\) .*/\1/p' "$LOG")
  [ -n "$ADDR" ] && break
  sleep 0.1
done
[ -n "${ADDR:-}" ] || { echo "demo.sh: netblast serve did not start:" >&2; cat "$LOG" >&2; exit 1; }
"$NB" run --target "$ADDR" --profile "$PROFILE" "$@"
