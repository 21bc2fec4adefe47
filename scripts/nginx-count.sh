# shellcheck shell=bash
# Sourced by the scripts that load one local nginx (compare-http.sh, floor-http.sh): starts it
# and counts the requests it handles, and each client's CPU and nginx's around a run.
# Needs WORK (readable by nginx's workers), HTTP_PORT and HTTPS_PORT; sources scripts/cost.sh.
#
#   nginx_up          starts scripts/nginx-local.sh in the background (its pid in NGINX; the
#                     caller's EXIT trap stops it), waits until it answers 200 with the test
#                     page at URL, and sets NGINX_PIDS (master and workers)
#   handled           the requests nginx has handled so far (its stub_status; the reading
#                     itself is one more)
#   measured NAME CMD...
#                     runs CMD: its CPU and nginx's around it (NAME.cost), the requests nginx
#                     handled meanwhile (NAME.handled)

# shellcheck source=scripts/cost.sh
. scripts/cost.sh

nginx_up() {
  scripts/nginx-local.sh "$WORK/nginx" "$HTTP_PORT" "$HTTPS_PORT" >"$WORK/nginx.out" 2>&1 &
  # shellcheck disable=SC2034 # the caller's EXIT trap stops it
  NGINX=$!
  for _ in $(seq 1 50); do
    curl -s -o /dev/null "http://127.0.0.1:$HTTP_PORT/" && break
    sleep 0.1
  done
  URL="http://127.0.0.1:$HTTP_PORT/"
  # Measure what we mean to: a 200 with the 45-byte page, not an error page.
  local body
  body=$(curl -sf "$URL") || { echo "nginx does not answer 200 at $URL:" >&2; cat "$WORK/nginx.out" >&2; exit 1; }
  [ "${#body}" -ge 40 ] || { echo "unexpected body from $URL: $body" >&2; exit 1; }
  NGINX_PIDS=$(pgrep -f "nginx: (master|worker)" | tr '\n' ' ')
}

handled() { curl -sf "http://127.0.0.1:$HTTP_PORT/nginx_status" | awk 'NR == 3 { print $3 }'; }

measured() { # name command...
  local name=$1; shift
  local h0; h0=$(handled)
  process_cost "$name" "$NGINX_PIDS" "$@"
  echo $(( $(handled) - h0 - 1 )) >"$WORK/$name.handled"
  sleep 0.5
}
