#!/usr/bin/env bash
# Builds the Kubernetes the deployment test runs (tests/k8s.rs in the netblast crate): the control
# plane (kube-apiserver, kube-controller-manager, kube-scheduler), the nodes' kubelet and
# kube-proxy, and kubectl, from the Go module k8s.io/kubernetes at $K8S_VERSION, into
# $NETBLAST_TOOLS/k8s/bin, each stamped with its version (the kubelet reports it to the apiserver);
# CoreDNS, the cluster's names (scripts/k8s-cluster.sh); and Prometheus with its Kubernetes
# discovery (deploy/prometheus/kubernetes-sd.yml). Kubernetes'
# own go.mod points its 31 k8s.io/* staging modules at its source tree; a module that requires
# it replaces each with the published module of the same release (v0.X.Y for v1.X.Y), read from
# that go.mod, not written here. About 5 minutes the first time; nothing to do when built.
#   scripts/k8s-build.sh            build (or say it is built)
#   scripts/k8s-build.sh --check    exit 0 if built, 1 if not
set -euo pipefail
K8S_VERSION=${K8S_VERSION:-v1.34.4}
COREDNS_VERSION=${COREDNS_VERSION:-v1.14.3}
# Prometheus 3.16 (module v0.316.0) with its Kubernetes discovery, which Debian's build leaves out.
PROMETHEUS_VERSION=${PROMETHEUS_VERSION:-v0.316.0}
TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
DIR=$TOOLS/k8s
BIN=$DIR/bin
CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet kube-proxy)

built() {
  for c in "${CMDS[@]}" coredns prometheus; do [ -x "$BIN/$c" ] || return 1; done
  [ "$(cat "$DIR/version" 2>/dev/null)" = "$K8S_VERSION" ]
}
if [ "${1:-}" = "--check" ]; then built; exit; fi
if built; then echo "k8s-build.sh: $K8S_VERSION already built in $BIN"; exit 0; fi
command -v go >/dev/null || { echo "k8s-build.sh: no Go toolchain (apt-get install golang-go)" >&2; exit 1; }

mkdir -p "$DIR/src" "$BIN"
cd "$DIR/src"
staging=v0.${K8S_VERSION#v1.}
mod=$(GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
{
  echo "module netblast.local/k8s-control-plane"
  echo
  echo "go 1.24.0"
  echo
  echo "require k8s.io/kubernetes $K8S_VERSION"
  echo
  echo "replace ("
  sed -nE 's#^[[:space:]]+(k8s\.io/[a-z0-9-]+) => \./staging/.*#\t\1 => \1 '"$staging"'#p' "$mod"
  echo ")"
} > go.mod
n=$(grep -c "=> k8s.io/" go.mod)
[ "$n" -gt 20 ] || { echo "k8s-build.sh: found only $n staging modules in $mod" >&2; exit 1; }
{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  echo "import ("
  for c in "${CMDS[@]}"; do echo "	_ \"k8s.io/kubernetes/cmd/$c\""; done
  echo ")"
} > tools.go
echo "k8s-build.sh: resolving $K8S_VERSION ($n staging modules at $staging)"
GOFLAGS=-mod=mod go mod tidy
# What an earlier build of the same version left is kept (a build of this script before the nodes
# made only the control plane).
[ "$(cat "$DIR/version" 2>/dev/null)" = "$K8S_VERSION" ] || rm -f "$BIN"/*
for c in "${CMDS[@]}"; do
  [ -x "$BIN/$c" ] && continue
  echo "k8s-build.sh: building $c"
  GOFLAGS=-mod=mod go build -ldflags "-X k8s.io/component-base/version.gitVersion=$K8S_VERSION" \
    -o "$BIN/$c" "k8s.io/kubernetes/cmd/$c"
done
if [ ! -x "$BIN/coredns" ]; then
  echo "k8s-build.sh: building coredns $COREDNS_VERSION"
  GOBIN=$BIN GOFLAGS=-mod=mod go install "github.com/coredns/coredns@$COREDNS_VERSION"
fi
if [ ! -x "$BIN/prometheus" ]; then
  echo "k8s-build.sh: building prometheus $PROMETHEUS_VERSION (about 5 minutes)"
  GOBIN=$BIN GOFLAGS=-mod=mod go install "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
fi
echo "$K8S_VERSION" > "$DIR/version"
echo "k8s-build.sh: built ${CMDS[*]} coredns prometheus in $BIN"
