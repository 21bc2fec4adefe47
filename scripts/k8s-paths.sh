#!/usr/bin/env bash
# The cluster's path matrix as one command: applies deploy/k8s-paths (five agents placed by
# Kubernetes, their Services, the campaign Job) with the current kubectl context, waits for the
# Job, keeps its summary and prints the report, then deletes the namespace netblast-paths.
#
#   scripts/k8s-paths.sh [-o DIR] [--image REF] [--keep] [CAMPAIGN FLAGS...]
#
#   -o DIR        where the summary goes: DIR/summary.json (the Job's output) and DIR/report.txt
#                 (netblast report of it); default ./netblast-paths
#   --image REF   the netblast image the nodes run (default: the kustomization's netblast:0.1.0)
#   --keep        leave the namespace (agents, Job, its log) in place
#   CAMPAIGN FLAGS  added to the Job's `netblast campaign` (--set duration=2s, --repeats 5,
#                 --axis path=pod-to-pod,service)
#
# The nodes are labelled as deploy/k8s says (netblast.io/role=client, =server). The token is
# deploy/k8s-paths/token, made (32 random bytes) when missing. KUBECTL names kubectl, NETBLAST
# the netblast that renders the report (else netblast on PATH, else target/release/netblast).
# Exit: 0 the campaign ran every run; 1 it did not (its log says why); 2 bad arguments.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kust="$root/deploy/k8s-paths"
KUBECTL=${KUBECTL:-kubectl}
NS=netblast-paths
out=netblast-paths image="" keep=0 extra=()
usage() { sed -n '5,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in
    -o) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
    --image) [ $# -ge 2 ] || usage; image=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    -h|--help) usage ;;
    *) extra+=("$1"); shift ;;
  esac
done
command -v "$KUBECTL" >/dev/null || { echo "k8s-paths: $KUBECTL not found (set KUBECTL)" >&2; exit 2; }
if [ ! -s "$kust/token" ]; then
  (umask 077; head -c 32 /dev/urandom | base64 > "$kust/token")
  echo "k8s-paths: made a token in $kust/token"
fi
mkdir -p "$out"
work=$(mktemp -d)
cleanup() {
  rm -rf "$work"
  if [ "$keep" = 0 ]; then
    "$KUBECTL" delete namespace "$NS" --wait=true --timeout=180s >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# An overlay beside nothing of the repository's (kustomize takes only relative paths to a base).
{
  echo "apiVersion: kustomize.config.k8s.io/v1beta1"
  echo "kind: Kustomization"
  echo "resources:"
  echo "  - $(realpath --relative-to="$work" "$kust")"
  if [ -n "$image" ]; then
    name=${image%:*} tag=${image##*:}
    # A registry port is no tag: REF without a tag after its last slash means :latest.
    case $tag in */*) name=$image tag=latest ;; esac
    [ "$name" != "$image" ] || tag=latest
    printf 'images:\n  - name: netblast\n    newName: %s\n    newTag: "%s"\n' "$name" "$tag"
  fi
  if [ ${#extra[@]} -gt 0 ]; then
    printf 'patches:\n  - target:\n      kind: Job\n      name: netblast-paths\n    patch: |\n'
    for a in "${extra[@]}"; do
      # Each flag one element of the Job's args, as JSON (quotes and backslashes kept).
      printf '      - op: add\n        path: /spec/template/spec/containers/0/args/-\n        value: %s\n' \
        "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$a")"
    done
  fi
} > "$work/kustomization.yaml"

# A Job of an earlier run would keep its spec (a Job's template cannot change).
"$KUBECTL" -n "$NS" delete job netblast-paths --ignore-not-found --wait=true >/dev/null 2>&1 || true
"$KUBECTL" apply -k "$work" >/dev/null
echo "k8s-paths: applied deploy/k8s-paths; waiting for the campaign (kubectl -n $NS logs job/netblast-paths)"
state=""
# The Job's own deadline (activeDeadlineSeconds) bounds it; this bounds the wait beyond it.
for _ in $(seq 1 2400); do
  state=$("$KUBECTL" -n "$NS" get job netblast-paths \
    -o jsonpath='{.status.succeeded}/{.status.failed}' 2>/dev/null || true)
  case $state in 1/*|*/1) break ;; esac
  sleep 1
done
"$KUBECTL" -n "$NS" logs job/netblast-paths > "$work/log" 2>&1 || true
case $state in
  1/*) ;;
  *)
    echo "k8s-paths: the campaign Job did not complete (succeeded/failed: ${state:-none}); its log:" >&2
    cat "$work/log" >&2
    cp "$work/log" "$out/job.log"
    "$KUBECTL" -n "$NS" get pods -o wide >&2 || true
    exit 1 ;;
esac
mv "$work/log" "$out/summary.json"
nb=${NETBLAST:-$(command -v netblast || echo "$root/target/release/netblast")}
if [ -x "$nb" ]; then
  "$nb" report "$out/summary.json" | tee "$out/report.txt"
else
  echo "k8s-paths: no netblast to render $out/summary.json (set NETBLAST)" >&2
fi
echo "k8s-paths: $out/summary.json"
