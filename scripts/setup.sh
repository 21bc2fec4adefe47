#!/usr/bin/env bash
# Sets up a fresh Debian/Ubuntu machine for netblast: installs what the build, the tests and the
# comparison scripts need, then builds the release binary. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

PKGS=(
  build-essential pkg-config       # C toolchain for crates with build scripts
  clang llvm libbpf-dev bpftool    # eBPF programs (ebpf/*.c) and their inspection
  iproute2 nftables                # network namespaces, veth, loss injection in tests
  iperf3 qperf nginx wrk sockperf  # anchor tools the comparison scripts run side by side
  nghttp2-client                   # ... h2load (scripts/compare-h2.sh)
  procps curl openssl util-linux   # pgrep, curl and nsenter in scripts; certificates for nginx
  ethtool                          # the judge of the offloads run -V reads (tests/habits.rs)
  jq                               # --json-stream read line by line as a user pipes it (tests/habits.rs)
  time                             # /usr/bin/time: the compare scripts' CPU per operation
  valgrind                         # scripts/instructions.sh: instructions per operation (callgrind)
  shellcheck python3-yaml          # scripts/check-deploy.sh (Azure and Kubernetes files)
  cloud-init                       # ... its judge of the custom data (`cloud-init schema`)
  chromium fonts-dejavu-core       # the HTML report's test renders it in headless Chromium
  prometheus                       # promtool and a scraper: the suite judges the metrics with them
  etcd-server                      # the Kubernetes control plane the manifests are scheduled on
  containerd runc containernetworking-plugins  # ... and the real nodes that run them
)
if command -v apt-get >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
  # Debian starts nginx, Prometheus and etcd when they are installed; netblast's tests start their
  # own.
  for svc in nginx prometheus etcd containerd; do
    if command -v systemctl >/dev/null && systemctl is-active --quiet "$svc" 2>/dev/null; then
      $SUDO systemctl stop "$svc" || true
    fi
  done
else
  echo "setup.sh: no apt-get here; install these yourself: ${PKGS[*]}" >&2
fi

if ! command -v cargo >/dev/null; then
  if [ -x "$HOME/.cargo/bin/cargo" ]; then
    export PATH="$HOME/.cargo/bin:$PATH"
  else
    echo "setup.sh: cargo not found. Install a stable Rust toolchain (rustup, or your distribution's rustc >= 1.85)." >&2
    exit 1
  fi
fi

# The tools that judge what netblast writes for others to read (scripts/check-deploy.sh):
# the Azure CLI's own parser, Kubernetes' schemas, kustomize. Pinned: a new release is a
# deliberate change, checked before the pin moves.
TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
venv() {  # DIR PACKAGE==VERSION...
  local dir=$1; shift
  [ -x "$dir/bin/pip" ] || python3 -m venv "$dir"
  "$dir/bin/pip" install -q --disable-pip-version-check "$@"
}
if ! "$TOOLS/azcli/bin/az" version >/dev/null 2>&1; then
  echo "setup.sh: installing azure-cli 2.91.0 in $TOOLS/azcli (about a minute)"
  venv "$TOOLS/azcli" azure-cli==2.91.0
fi
venv "$TOOLS/py" kubernetes-validate==1.37.0 hdrhistogram==0.10.8
GOBIN_DIR=$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin
if [ ! -x "$GOBIN_DIR/kustomize" ]; then
  if command -v go >/dev/null; then
    echo "setup.sh: installing kustomize v5.5.0 with go install"
    GOFLAGS=-mod=mod go install sigs.k8s.io/kustomize/kustomize/v5@v5.5.0
  else
    echo "setup.sh: no Go toolchain: install kustomize v5.5.0 yourself (scripts/check-deploy.sh needs it)" >&2
  fi
fi

# kube-apiserver, -controller-manager, -scheduler, kubelet, kube-proxy, kubectl and CoreDNS from
# source, for the k8s test (about 6 minutes the first time; kept in $NETBLAST_TOOLS/k8s).
if command -v go >/dev/null; then
  scripts/k8s-build.sh
else
  echo "setup.sh: no Go toolchain: the Kubernetes control-plane test will be skipped" >&2
fi

cargo build --release --locked -p netblast
echo "setup.sh: built target/release/netblast"
