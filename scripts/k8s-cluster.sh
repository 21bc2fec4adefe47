#!/usr/bin/env bash
# A real Kubernetes cluster on this one machine, for the deployment test (tests/k8s.rs) and for
# trying the manifests by hand: etcd and the control plane on a bridge of its own, CoreDNS for
# the cluster's names, and nodes that each run in a network namespace of their own with their own
# containerd (runc, the bridge CNI), kubelet and kube-proxy (nftables), as kind does with
# containers. Pods get 10.244.N.0/24 on node N; the nodes are 10.224.0.1N on the bridge nbk8s0
# (host side 10.224.0.1, where the apiserver and CoreDNS listen); routes join every node's pods.
# Nothing leaves the machine: the nodes have no default route (an address elsewhere is
# unreachable at once), and their registries are a closed port on loopback.
# Root only (namespaces, mounts, cgroups). One cluster at a time: its names are fixed, and `up`
# first removes what a killed earlier one left.
#
#   scripts/k8s-cluster.sh up DIR IMAGE.tar...   start, import the images on every node, wait
#                                                until every node is Ready; DIR/kubeconfig
#   scripts/k8s-cluster.sh down DIR              stop everything, unmount, delete the namespaces,
#                                                bridge and cgroups, restore the sysctls
#
# NODES (default "client-1:client client-2:client server-1:server server-2:server system-1:")
# names the nodes and their netblast.io/role labels (none after the colon: a node for the rest,
# such as the coordinator Job, as a managed cluster's system pool). The binaries come from scripts/k8s-build.sh
# ($NETBLAST_TOOLS/k8s/bin); containerd, runc and the CNI plugins from Debian (scripts/setup.sh).
#
# Facts this rests on (each found the hard way): runc cannot set a sandbox's oom_score_adj here
# (no CAP_SYS_RESOURCE), so containerd runs with restrict_oom_score_adj; the kubelet needs
# failCgroupV1: false (cgroup v1) and failSwapOn: false, and rewrites vm.overcommit_memory,
# kernel.panic and kernel.panic_on_oops machine-wide (restored by `down`); `kubectl logs` needs
# --kubelet-preferred-address-types=InternalIP; the sandbox image is built here (scripts/image.py
# pause), never pulled.
set -euo pipefail
cmd=${1:-}
DIR=${2:-}
if [ -z "$cmd" ] || [ -z "$DIR" ]; then sed -n "2,17p" "$0" >&2; exit 2; fi
[ "$(id -u)" = 0 ] || { echo "k8s-cluster.sh: needs root (network namespaces, mounts, cgroups)" >&2; exit 1; }
shift 2
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
BIN=$TOOLS/k8s/bin
NODES=${NODES:-client-1:client client-2:client server-1:server server-2:server system-1:}
BR=nbk8s0
HOST_IP=10.224.0.1
SYSCTLS="vm.overcommit_memory kernel.panic kernel.panic_on_oops net.ipv4.ip_forward
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables"
PAUSE=netblast.local/pause:3.10

say() { echo "k8s-cluster.sh: $*" >&2; }

# Node i (from 1): its address, pod subnet and namespace.
node_ip() { echo "10.224.0.$((10 + $1))"; }
pod_net() { echo "10.244.$1.0/24"; }
ns_of() { echo "nbk8s-$1"; }

# Starts a program in the background, detached (it outlives this script), logged to DIR/NAME.log,
# its pid in DIR/pids. With NETNS set, inside that network namespace.
start() {
  local name=$1
  shift
  if [ -n "${NETNS:-}" ]; then set -- nsenter --net="/run/netns/$NETNS" "$@"; fi
  setsid "$@" </dev/null >"$DIR/$name.log" 2>&1 &
  echo "$! $name" >>"$DIR/pids"
}

# Waits for a command to succeed, up to $1 seconds, naming what it waits for ($2) and the log to
# read when it does not come.
wait_for() {
  local secs=$1 what=$2 log=$3
  shift 3
  local end=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    local pid name
    while read -r pid name; do
      kill -0 "$pid" 2>/dev/null && continue
      say "$name exited while waiting for $what; the end of $DIR/$name.log:"
      tail -20 "$DIR/$name.log" >&2 || true
      return 1
    done <"$DIR/pids"
    if [ $SECONDS -ge $end ]; then
      say "$what not ready in ${secs}s; the end of $log:"
      tail -20 "$log" >&2 || true
      return 1
    fi
    sleep 0.2
  done
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

kill_pids() {
  # Kubelets and proxies first (they would restart what containerd stops), the control plane last.
  [ -f "$DIR/pids" ] || return 0
  local order
  for order in 'kubelet|kube-proxy' 'containerd' '.'; do
    local pids=()
    while read -r pid name; do
      [[ $name =~ ^($order) ]] && kill -0 "$pid" 2>/dev/null && pids+=("$pid")
    done <"$DIR/pids"
    [ ${#pids[@]} -eq 0 ] && continue
    kill -TERM "${pids[@]}" 2>/dev/null || true
    for _ in $(seq 50); do
      local alive=0
      for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
      [ $alive = 0 ] && break
      sleep 0.1
    done
    kill -KILL "${pids[@]}" 2>/dev/null || true
  done
}

# Every container of a node's runc, killed and deleted; then its shims.
stop_containers() {
  local root
  for root in "$DIR"/*/runc/k8s.io; do
    [ -d "$root" ] || continue
    for id in $(runc --root "$root" list -q 2>/dev/null); do
      runc --root "$root" kill --all "$id" KILL 2>/dev/null || true
      runc --root "$root" delete --force "$id" 2>/dev/null || true
    done
  done
  pkill -KILL -f "containerd-shim-runc-v2 .*-address $DIR/" 2>/dev/null || true
}

down() {
  kill_pids
  stop_containers
  # Mounts under DIR (rootfs overlays, network namespaces, secret and projected volumes), deepest
  # first; then the node namespaces, the bridge (its routes go with it), the nodes' cgroups.
  awk -v d="$DIR/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo | sort -r | while read -r m; do
    umount -l "$m" 2>/dev/null || true
  done
  for entry in $NODES; do ip netns del "$(ns_of "${entry%%:*}")" 2>/dev/null || true; done
  ip link del "$BR" 2>/dev/null || true
  for entry in $NODES; do
    find /sys/fs/cgroup/*/"$(ns_of "${entry%%:*}")" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
  if [ -f "$DIR/sysctls" ]; then
    while read -r key value; do sysctl -qw "$key=$value" 2>/dev/null || true; done <"$DIR/sysctls"
    rm -f "$DIR/sysctls"
  fi
  rm -f "$DIR/pids"
}

network() {
  ip link add "$BR" type bridge
  ip addr add "$HOST_IP/24" dev "$BR"
  ip link set "$BR" up
  sysctl -qw net.ipv4.ip_forward=1
  local i=0 entry
  for entry in $NODES; do
    i=$((i + 1))
    local name=${entry%%:*} ns
    ns=$(ns_of "$name")
    ip netns add "$ns"
    ip link add "nbk8s$i" type veth peer name eth0 netns "$ns"
    ip link set "nbk8s$i" master "$BR" up
    ip -n "$ns" addr add "$(node_ip $i)/24" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_forward=1
    ip route add "$(pod_net $i)" via "$(node_ip $i)"
  done
  # Every node reaches every other node's pods directly over the bridge (host-gw).
  local a=0 b
  for entry in $NODES; do
    a=$((a + 1)); b=0
    for _ in $NODES; do
      b=$((b + 1))
      [ $a = $b ] || ip -n "$(ns_of "${entry%%:*}")" route add "$(pod_net $b)" via "$(node_ip $b)"
    done
  done
}

control_plane() {
  local etcd_port peer_port
  etcd_port=$(free_port); peer_port=$(free_port)
  mkdir -p "$DIR/certs"
  start etcd etcd --data-dir="$DIR/etcd" --listen-client-urls="http://127.0.0.1:$etcd_port" \
    --advertise-client-urls="http://127.0.0.1:$etcd_port" --listen-peer-urls="http://127.0.0.1:$peer_port" \
    --initial-advertise-peer-urls="http://127.0.0.1:$peer_port" --initial-cluster="default=http://127.0.0.1:$peer_port"
  openssl genrsa -out "$DIR/sa.key" 2048 2>/dev/null
  local token
  token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
  echo "$token,admin,admin,system:masters" >"$DIR/tokens.csv"
  start apiserver "$BIN/kube-apiserver" --etcd-servers="http://127.0.0.1:$etcd_port" \
    --bind-address="$HOST_IP" --advertise-address="$HOST_IP" --secure-port=6443 \
    --cert-dir="$DIR/certs" --token-auth-file="$DIR/tokens.csv" --authorization-mode=Node,RBAC \
    --service-account-issuer=https://kubernetes.default.svc --service-account-key-file="$DIR/sa.key" \
    --service-account-signing-key-file="$DIR/sa.key" --service-cluster-ip-range=10.96.0.0/16 \
    --kubelet-preferred-address-types=InternalIP --allow-privileged=true
  cat >"$DIR/kubeconfig" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: t
  cluster:
    server: https://$HOST_IP:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: $token
contexts:
- name: t
  context:
    cluster: t
    user: admin
current-context: t
EOF
  wait_for 90 "kube-apiserver" "$DIR/apiserver.log" \
    sh -c "[ \"\$('$BIN/kubectl' --kubeconfig='$DIR/kubeconfig' get --raw /readyz)\" = ok ]"
  start controller-manager "$BIN/kube-controller-manager" --kubeconfig="$DIR/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$(free_port)" --service-account-private-key-file="$DIR/sa.key" \
    --root-ca-file="$DIR/certs/apiserver.crt" --use-service-account-credentials=false
  start scheduler "$BIN/kube-scheduler" --kubeconfig="$DIR/kubeconfig" --leader-elect=false \
    --bind-address=127.0.0.1 --secure-port="$(free_port)"
  # The cluster's names (headless Services: one address per ready pod), nothing outside them.
  cat >"$DIR/Corefile" <<EOF
cluster.local:53 {
    bind $HOST_IP
    errors
    kubernetes cluster.local {
        kubeconfig $DIR/kubeconfig t
    }
}
.:53 {
    bind $HOST_IP
    template ANY ANY {
        rcode NXDOMAIN
    }
}
EOF
  start coredns "$BIN/coredns" -conf "$DIR/Corefile"
}

# One node: containerd, the images, the CNI configuration, kubelet and kube-proxy, in its namespace.
node() {
  local i=$1 name=$2 role=$3 images=("${@:4}")
  local n=$DIR/$name ns ip
  ns=$(ns_of "$name"); ip=$(node_ip "$i")
  mkdir -p "$n/cni" "$n/logs" "$n/kubelet"
  cat >"$n/containerd.toml" <<EOF
version = 2
root = "$n/containerd/root"
state = "$n/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = "$n/containerd.sock"
[plugins."io.containerd.internal.v1.opt"]
  path = "$n/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = "$n/runc"
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$n/cni"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$n/certs.d"
EOF
  # Every registry is a closed port on loopback: an image not imported fails to pull at once,
  # and nothing is asked of a registry elsewhere.
  mkdir -p "$n/certs.d/_default"
  cat >"$n/certs.d/_default/hosts.toml" <<EOF
server = "http://127.0.0.1:9"
[host."http://127.0.0.1:9"]
  capabilities = ["pull", "resolve"]
EOF
  cat >"$n/cni/10-bridge.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "nbk8s",
  "plugins": [
    {
      "type": "bridge", "bridge": "cbr0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
      "ipam": {"type": "host-local", "dataDir": "$n/ipam", "ranges": [[{"subnet": "$(pod_net "$i")"}]],
               "routes": [{"dst": "0.0.0.0/0"}]}
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  NETNS=$ns start "$name-containerd" containerd --config "$n/containerd.toml"
  wait_for 30 "containerd on $name" "$DIR/$name-containerd.log" ctr -a "$n/containerd.sock" version
  local img
  for img in "${images[@]}"; do
    ctr -a "$n/containerd.sock" -n k8s.io images import --no-unpack "$img" >/dev/null
  done
  # The kubelet's cgroup root, made here (it must exist), with the cpuset's CPUs and memory nodes.
  local c
  for c in /sys/fs/cgroup/*/; do
    [ "$c" = /sys/fs/cgroup/unified/ ] && continue
    mkdir -p "$c$ns"
  done
  cat /sys/fs/cgroup/cpuset/cpuset.cpus >"/sys/fs/cgroup/cpuset/$ns/cpuset.cpus"
  cat /sys/fs/cgroup/cpuset/cpuset.mems >"/sys/fs/cgroup/cpuset/$ns/cpuset.mems"
  echo "nameserver $HOST_IP" >"$n/resolv.conf"
  cat >"$n/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
healthzBindAddress: $ip
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
cgroupDriver: cgroupfs
cgroupRoot: /$ns
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$n/containerd.sock
clusterDNS: [$HOST_IP]
clusterDomain: cluster.local
resolvConf: $n/resolv.conf
podLogsDir: $n/logs
readOnlyPort: 0
serializeImagePulls: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
localStorageCapacityIsolation: false
EOF
  NETNS=$ns start "$name-kubelet" "$BIN/kubelet" --config="$n/kubelet.yaml" --kubeconfig="$DIR/kubeconfig" \
    --hostname-override="$name" --node-ip="$ip" --root-dir="$n/kubelet" --cert-dir="$n/kubelet/pki" \
    ${role:+--node-labels="netblast.io/role=$role"}
  cat >"$n/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection: {kubeconfig: $DIR/kubeconfig}
mode: nftables
hostnameOverride: $name
bindAddress: $ip
healthzBindAddress: $ip:10256
metricsBindAddress: $ip:10249
clusterCIDR: 10.244.0.0/16
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOF
  NETNS=$ns start "$name-kube-proxy" "$BIN/kube-proxy" --config="$n/kube-proxy.yaml"
}

up() {
  local need
  for need in "$BIN/kube-apiserver" "$BIN/kubelet" "$BIN/kube-proxy" "$BIN/coredns"; do
    [ -x "$need" ] || { say "$need is not built (scripts/k8s-build.sh)"; exit 1; }
  done
  for need in etcd containerd containerd-shim-runc-v2 runc ctr nsenter openssl; do
    command -v "$need" >/dev/null || { say "$need is not installed (scripts/setup.sh)"; exit 1; }
  done
  [ -x /usr/lib/cni/bridge ] || { say "/usr/lib/cni/bridge is missing (apt-get install containernetworking-plugins)"; exit 1; }
  [ $# -gt 0 ] || { say "no images to import (scripts/image.py netblast; scripts/image.py pause)"; exit 2; }
  local img
  for img in "$@"; do [ -f "$img" ] || { say "$img: no such image archive"; exit 1; }; done
  down
  # A fresh cluster each time: DIR holds only what an earlier `up` made (it says so in a mark).
  if [ -n "$(ls -A "$DIR")" ] && [ ! -f "$DIR/.k8s-cluster" ]; then
    say "$DIR is not empty and not a cluster's directory: refusing to clear it"
    exit 1
  fi
  find "$DIR" -mindepth 1 -delete
  touch "$DIR/.k8s-cluster"
  local key
  for key in $SYSCTLS; do echo "$key $(sysctl -n "$key")"; done >"$DIR/sysctls"
  trap 'say "failed; removing what was started"; down' ERR
  network
  control_plane
  local i=0 entry
  for entry in $NODES; do
    i=$((i + 1))
    node "$i" "${entry%%:*}" "${entry#*:}" "$@"
  done
  local k=("$BIN/kubectl" --kubeconfig="$DIR/kubeconfig")
  wait_for 120 "the nodes" "$DIR/${NODES%%:*}-kubelet.log" \
    sh -c "[ \$('${k[0]}' '${k[1]}' get nodes --no-headers 2>/dev/null | grep -c ' Ready ') = $i ]"
  trap - ERR
  say "$i nodes Ready; KUBECONFIG=$DIR/kubeconfig"
}

case $cmd in
  up) up "$@" ;;
  down) down; say "down: $DIR" ;;
  *) echo "k8s-cluster.sh: up or down, not $cmd" >&2; exit 2 ;;
esac
