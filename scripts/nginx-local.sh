#!/usr/bin/env bash
# Runs a throwaway nginx on 127.0.0.1 in the foreground, for tests and comparisons:
#
#   scripts/nginx-local.sh DIR HTTP_PORT HTTPS_PORT [WORKERS]
#
# DIR is created (config, a self-signed certificate, the files served, logs). Locations:
#   /          a 45-byte file (the seeds' hey runs got 45-byte answers)
#   /503       status 503 (envoy answered some requests with 503 in the seeds)
#   /1mib      a 1 MiB file of random bytes (the seeds' vegeta runs)
#   /limited   the 45-byte file behind limit_req at LIMIT_RATE (default 2000r/s, burst 20): a
#              capacity made on purpose, each request over it answered 503
# HTTPS_PORT speaks HTTP/1.1 and h2 (ALPN), TLS 1.2 and 1.3, and resumes sessions. Stops on
# SIGTERM/SIGINT.
set -euo pipefail
DIR=$1
HTTP_PORT=$2
HTTPS_PORT=$3
WORKERS=${4:-auto}
LIMIT_RATE=${LIMIT_RATE:-2000r/s}
command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install nginx)" >&2; exit 2; }
command -v openssl >/dev/null || { echo "openssl is not installed (apt-get install openssl)" >&2; exit 2; }
mkdir -p "$DIR/www" "$DIR/tmp" "$DIR/logs"
printf 'netblast nginx test page: forty-five bytes!.\n' >"$DIR/www/index.html"
head -c 1048576 /dev/urandom >"$DIR/www/1mib"
if [ ! -f "$DIR/cert.pem" ]; then
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2 \
    -subj /CN=localhost -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$DIR/key.pem" -out "$DIR/cert.pem" 2>/dev/null
fi
# nginx workers may run as an unprivileged user: let them read what they serve.
chmod 755 "$DIR" "$DIR/www" "$DIR/tmp" "$DIR/logs"
chmod 644 "$DIR"/www/* "$DIR/cert.pem"
chmod 640 "$DIR/key.pem"
LIMIT_KEY='$binary_remote_addr'
cat >"$DIR/nginx.conf" <<EOF
worker_processes $WORKERS;
daemon off;
pid $DIR/nginx.pid;
error_log $DIR/logs/error.log warn;
events { worker_connections 16384; }
http {
    access_log off;
    client_body_temp_path $DIR/tmp/body;
    proxy_temp_path $DIR/tmp/proxy;
    fastcgi_temp_path $DIR/tmp/fastcgi;
    uwsgi_temp_path $DIR/tmp/uwsgi;
    scgi_temp_path $DIR/tmp/scgi;
    keepalive_requests 10000000;
    keepalive_timeout 60s;
    sendfile on;
    default_type application/octet-stream;
    # Keyed by the client's address: every client on this host is 127.0.0.1, one key.
    limit_req_zone $LIMIT_KEY zone=capped:1m rate=$LIMIT_RATE;
    server {
        listen 127.0.0.1:$HTTP_PORT reuseport;
        listen 127.0.0.1:$HTTPS_PORT ssl http2 reuseport;
        ssl_certificate $DIR/cert.pem;
        ssl_certificate_key $DIR/key.pem;
        # Both versions a client may hold a handshake to (nginx before 1.23.4 leaves 1.3 out),
        # and sessions to resume: ids in a cache, tickets (on by default).
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_session_cache shared:TLS:1m;
        root $DIR/www;
        location = / { try_files /index.html =404; }
        location = /503 { return 503; }
        location = /1mib { try_files /1mib =404; }
        # limit_req runs before the content phase: the location must serve a file (a return
        # would answer first).
        location = /limited { limit_req zone=capped burst=20; try_files /index.html =404; }
        # Requests handled, as the server counts them (compare-http.sh reads it around each run).
        location = /nginx_status { stub_status; }
    }
}
EOF
# Run as root, nginx serves from workers running as nobody: a directory above DIR they cannot
# enter (mktemp -d makes mode 700) turns every answer into a 404 page, which is fast, small and
# not what anyone meant to measure. Refuse that instead.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null &&
  ! setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$DIR/www/index.html"; then
  echo "nginx-local.sh: nginx workers (user nobody) cannot read $DIR/www; make every directory above it searchable (chmod o+x) or use another DIR" >&2
  exit 2
fi
exec nginx -c "$DIR/nginx.conf" -p "$DIR"
