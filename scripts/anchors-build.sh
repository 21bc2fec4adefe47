#!/usr/bin/env bash
# Builds today's anchor tools that Debian does not ship new enough, into $NETBLAST_TOOLS:
#   - iperf3 3.21 (esnet/iperf tag 3.21: a thread per stream, --gsro UDP GSO/GRO) from source,
#     into $NETBLAST_TOOLS/iperf3-3.21/bin/iperf3; the compare scripts use it, with Debian's
#     /usr/bin/iperf3 (3.12) as a second line;
#   - hey and vegeta, the seeds' HTTP tools, with `go install` (the Go module proxy).
# The iperf3 source: $IPERF3_SRC (a source tree, or a git repository holding the tag), else an
# earlier clone in $NETBLAST_TOOLS/src/iperf, else a clone from GitHub where GitHub can be reached. About a
# minute; nothing to do when built. Exit 0 when every tool is there, 1 (saying which) if not.
set -euo pipefail
TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
TAG=3.21
PREFIX=$TOOLS/iperf3-$TAG
missing=()

if [ -x "$PREFIX/bin/iperf3" ] && "$PREFIX/bin/iperf3" --version 2>/dev/null | grep -q "iperf $TAG"; then
  echo "anchors-build.sh: iperf3 $TAG already in $PREFIX"
else
  WORK=$(mktemp -d)
  trap 'rm -rf "$WORK"' EXIT
  src=""
  for cand in "${IPERF3_SRC:-}" "$TOOLS/src/iperf"; do
    [ -n "$cand" ] && [ -e "$cand" ] || continue
    if [ -f "$cand/configure" ]; then src=$cand; break; fi
    if git --git-dir="$cand" rev-parse -q --verify "refs/tags/$TAG" >/dev/null 2>&1 \
       || git -C "$cand" rev-parse -q --verify "refs/tags/$TAG" >/dev/null 2>&1; then
      gd=$(git -C "$cand" rev-parse --git-dir 2>/dev/null || echo "$cand")
      case "$gd" in /*) ;; *) gd=$cand/$gd ;; esac
      mkdir -p "$WORK/src"
      git --git-dir="$gd" archive "$TAG" | tar -x -C "$WORK/src"
      src=$WORK/src; break
    fi
  done
  if [ -z "$src" ] && git clone -q --depth 1 --branch "$TAG" https://github.com/esnet/iperf "$WORK/src" 2>/dev/null; then
    src=$WORK/src
  fi
  if [ -z "$src" ]; then
    echo "anchors-build.sh: no iperf3 $TAG source (set IPERF3_SRC to an esnet/iperf checkout)" >&2
    missing+=("iperf3 $TAG")
  else
    echo "anchors-build.sh: building iperf3 $TAG from $src into $PREFIX"
    (cd "$src" && ./configure -q --prefix="$PREFIX" --disable-shared >/dev/null && make -s -j"$(nproc)" >/dev/null && make -s install >/dev/null)
    "$PREFIX/bin/iperf3" --version | head -1
  fi
fi

if command -v go >/dev/null; then
  GOBIN_DIR=$(go env GOPATH)/bin
  [ -x "$GOBIN_DIR/hey" ] || GOFLAGS=-mod=mod go install github.com/rakyll/hey@latest
  [ -x "$GOBIN_DIR/vegeta" ] || GOFLAGS=-mod=mod go install github.com/tsenart/vegeta/v12@latest
else
  missing+=("hey and vegeta (no Go toolchain)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "anchors-build.sh: missing: ${missing[*]}" >&2
  exit 1
fi
