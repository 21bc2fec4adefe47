#!/usr/bin/env bash
# Checks the deployment files that cannot be tried here (no Azure, no cluster) with the tools
# that will read them, each shown first to refuse a deliberate mistake:
#
#   - shellcheck lints the scripts;
#   - deploy.sh --dry-run prints the seed's layout (checked for what it must hold), and every
#     `az` command it prints parses in the Azure CLI's own argument parser (run with an empty
#     configuration: "az login" means it parsed; "unrecognized arguments" or "invalid choice"
#     means it did not);
#   - the custom data it renders passes `cloud-init schema`;
#   - every kustomization under deploy/ builds with kustomize v5, and every object it renders
#     (and the coordinator's Job) validates strictly against Kubernetes' schemas
#     (kubernetes-validate --strict: unknown fields are errors); the manifests also agree with
#     each other (selectors and labels, ports, the Secret, the Services the Job resolves).
#
# The tools: scripts/setup.sh installs them (azure-cli and kubernetes-validate in a venv under
# $NETBLAST_TOOLS, kustomize with `go install`). Each is found on PATH or there; a missing one
# is an error that says so.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=${NETBLAST_TOOLS:-$HOME/.local/share/netblast-tools}
find_tool() {  # NAME CANDIDATE... : the first executable
  local name=$1; shift
  local c
  if c=$(command -v "$name" 2>/dev/null); then echo "$c"; return; fi
  for c in "$@"; do
    if [ -x "$c" ]; then echo "$c"; return; fi
  done
  echo "check-deploy: $name not found (on PATH or in ${*:-nowhere}); scripts/setup.sh installs it" >&2
  exit 1
}
AZ=$(find_tool az "$TOOLS/azcli/bin/az")
KUSTOMIZE=$(find_tool kustomize "$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin/kustomize" "$HOME/go/bin/kustomize")
KVALIDATE=$(find_tool kubernetes-validate "$TOOLS/py/bin/kubernetes-validate")
CLOUDINIT=$(find_tool cloud-init)
# Kubernetes releases the manifests must hold for: an old one still in service and the newest
# kubernetes-validate knows.
K8S_VERSIONS=(1.32.0 1.37.0)

shellcheck -S warning scripts/*.sh scripts/azure/*.sh

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf 'a-token\n' > "$WORK/token"
fail() { echo "check-deploy: $*" >&2; exit 1; }

# --- deploy.sh: bad input is refused with exit 2, naming what is wrong -------------------------
refused() {  # WHAT-THE-ERROR-NAMES ARGS...
  local says=$1 out; shift
  if out=$(scripts/azure/deploy.sh --rg perf --location westeurope --token-file "$WORK/token" --dry-run "$@" 2>&1); then
    fail "deploy.sh took $*"
  fi
  case "$out" in *"$says"*) ;; *) fail "unclear error for $*: $out" ;; esac
}
refused --netblast-url --netblast-url ftp://x
refused --orchestration-mode --netblast-url https://x --orchestration-mode Flex
refused --outbound --netblast-url https://x --outbound public
refused --keyvault-auth --netblast-url https://x --keyvault-auth acl

# --- deploy.sh: the plans ------------------------------------------------------------------------
URL=https://example.invalid/netblast
scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url $URL \
  --token-file "$WORK/token" --clients 30 --servers 20 --client-size Standard_D4_v4 --server-size Standard_D8_v4 \
  --allow 10.60.0.0/16 --dry-run --render "$WORK/clients.yaml" > "$WORK/plan.txt"
scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url $URL \
  --keyvault kv1 --secret nbtoken --register 10.50.3.4:5300 --dry-run --render "$WORK/clients-kv.yaml" > "$WORK/plan-kv.txt"
scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url $URL \
  --keyvault kv1 --secret nbtoken --keyvault-auth policy --dry-run > "$WORK/plan-kv-policy.txt"
scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url $URL --token-file "$WORK/token" \
  --orchestration-mode Uniform --outbound none --dry-run > "$WORK/plan-uniform.txt"

python3 - "$WORK" <<'PY'
import base64, shlex, sys, yaml

work = sys.argv[1]
def fail(msg):
    print(f"check-deploy: {msg}", file=sys.stderr)
    sys.exit(1)
def commands(name):
    return [shlex.split(l[2:]) for l in open(f"{work}/{name}") if l.startswith("+ ")]
def opt(cmd, name):
    return cmd[cmd.index(name) + 1] if name in cmd else None

cmds = commands("plan.txt")
vmss = {opt(c, "--name"): c for c in cmds if c[:3] == ["az", "vmss", "create"]}
if set(vmss) != {"netblast-clients", "netblast-servers"}:
    fail(f"expected two scale sets, got {sorted(vmss)}")
c, s = vmss["netblast-clients"], vmss["netblast-servers"]
for cmd, count, sku, subnet in [(c, "30", "Standard_D4_v4", "clients"), (s, "20", "Standard_D8_v4", "servers")]:
    got = (opt(cmd, "--instance-count"), opt(cmd, "--vm-sku"), opt(cmd, "--subnet"), opt(cmd, "--resource-group"))
    if got != (count, sku, subnet, "perf"):
        fail(f"scale set {opt(cmd, '--name')}: count, size, subnet, group = {got}")
    if "--assign-identity" not in cmd or opt(cmd, "--custom-data") is None:
        fail(f"scale set {opt(cmd, '--name')} lacks a managed identity or custom data")
    # Said, not left to the CLI's default (which changed from Uniform to Flexible in 2.55).
    if opt(cmd, "--orchestration-mode") != "Flexible":
        fail(f"scale set {opt(cmd, '--name')}: orchestration mode {opt(cmd, '--orchestration-mode')}")
subnets = {opt(x, "--subnet-name") or opt(x, "--name"): opt(x, "--subnet-prefixes") or opt(x, "--address-prefixes")
           for x in cmds if x[:3] == ["az", "network", "vnet"] and "update" not in x}
if subnets.get("clients") != "10.50.1.0/24" or subnets.get("servers") != "10.50.2.0/24":
    fail(f"subnets: {subnets}")
# Outbound access for the downloads: a NAT gateway on both subnets, made before the instances.
nat = [x for x in cmds if x[:4] == ["az", "network", "nat", "gateway"]]
natted = {opt(x, "--name") for x in cmds if x[:5] == ["az", "network", "vnet", "subnet", "update"] and opt(x, "--nat-gateway")}
first_vmss = next(i for i, x in enumerate(cmds) if x[:3] == ["az", "vmss", "create"])
last_nat = max(i for i, x in enumerate(cmds) if x[:5] == ["az", "network", "vnet", "subnet", "update"])
if len(nat) != 1 or natted != {"clients", "servers"} or last_nat > first_vmss:
    fail(f"NAT gateway: {nat}, on subnets {natted}")
plan = open(f"{work}/plan.txt").read()
if "--clients azure:vmss=netblast-clients,rg=perf --servers azure:vmss=netblast-servers,rg=perf" not in plan:
    fail("the plan does not end with the fleet command for its scale sets")
uni = commands("plan-uniform.txt")
if {opt(x, "--orchestration-mode") for x in uni if x[:3] == ["az", "vmss", "create"]} != {"Uniform"}:
    fail("--orchestration-mode Uniform is not passed on")
if any(x[:4] == ["az", "network", "nat", "gateway"] for x in uni):
    fail("--outbound none still makes a NAT gateway")
# Key Vault: the vault is asked how it grants access; an RBAC vault gives each scale set's
# identity "Key Vault Secrets User" on the vault, a policy vault a get-secrets policy.
kv = commands("plan-kv.txt")
grants = [x for x in kv if x[:4] == ["az", "role", "assignment", "create"]]
if (len(grants) != 2 or any(opt(g, "--role") != "Key Vault Secrets User" for g in grants)
        or any(x[:3] == ["az", "keyvault", "set-policy"] for x in kv)
        or not any(x[:3] == ["az", "keyvault", "show"] for x in kv)):
    fail("an RBAC vault: each scale set's identity gets Key Vault Secrets User on it, and no access policy")
policy = commands("plan-kv-policy.txt")
if len([x for x in policy if x[:3] == ["az", "keyvault", "set-policy"]]) != 2 or any(x[:2] == ["az", "role"] for x in policy):
    fail("a policy vault: each scale set's identity gets a get-secrets access policy")
if "registered:clients:2" not in open(f"{work}/plan-kv.txt").read():
    fail("the registering plan waits for the registrations")

# The rendered custom data.
for name, token_b64 in [("clients.yaml", "a-token"), ("clients-kv.yaml", None)]:
    raw = open(f"{work}/{name}").read()
    if not raw.startswith("#cloud-config") or "@" in raw:
        fail(f"custom data {name}: not cloud-config, or a placeholder was left")
    ci = yaml.safe_load(raw)
    files = {f["path"]: f for f in ci["write_files"]}
    if token_b64 and base64.b64decode(files["/etc/netblast/token"]["content"]) != token_b64.encode():
        fail("custom data: the token does not round-trip")
    unit = files["/etc/systemd/system/netblast-agent.service"]["content"]
    execs = [l for l in unit.splitlines() if l.startswith("ExecStart=")]
    want = "ExecStart=/usr/local/bin/netblast serve --token-file /etc/netblast/token"
    if token_b64 and execs != [want + " --allow 10.60.0.0/16"]:
        fail(f"custom data: {execs}")
    if "LimitNOFILE=" not in unit or not any("systemctl enable --now netblast-agent" in r for r in ci["runcmd"]):
        fail("custom data: the service is not enabled, or has no descriptor limit")
PY

# --- The Azure CLI's parser judges every command printed -----------------------------------------
az_judge() {  # PLAN-FILE...: prints each distinct command's verdict; fails on any that did not parse
  python3 - "$AZ" "$@" <<'PY'
import concurrent.futures, os, shlex, subprocess, sys, tempfile

az, plans = sys.argv[1], sys.argv[2:]
seen, cmds = set(), []
for p in plans:
    for line in open(p):
        if line.startswith("+ az "):
            argv = shlex.split(line[2:])
            if tuple(argv) not in seen:
                seen.add(tuple(argv))
                cmds.append(argv)

def judge(argv):
    with tempfile.TemporaryDirectory() as cfg:
        env = dict(os.environ, AZURE_CONFIG_DIR=cfg, AZURE_CORE_COLLECT_TELEMETRY="false", AZURE_CORE_NO_COLOR="true")
        r = subprocess.run([az] + argv[1:], env=env, capture_output=True, text=True, timeout=120)
    parsed = r.returncode == 1 and "az login" in r.stderr
    return argv, parsed, r.stderr.strip().splitlines()[:3]

bad = 0
with concurrent.futures.ThreadPoolExecutor(4) as pool:
    for argv, parsed, why in pool.map(judge, cmds):
        if not parsed:
            bad += 1
            print(f"check-deploy: az does not take: {shlex.join(argv)}\n    {' | '.join(why)}", file=sys.stderr)
print(f"check-deploy: {len(cmds) - bad} of {len(cmds)} az commands parse in {az}")
sys.exit(1 if bad else 0)
PY
}
# The judge refuses a value the CLI does not take and a flag it does not have.
sed -n -e '0,/--orchestration-mode Flexible/s//--orchestration-mode Flex/p' "$WORK/plan.txt" > "$WORK/bad-value.txt"
sed -n -e '0,/--nat-gateway /s//--nat-gateways /p' "$WORK/plan.txt" > "$WORK/bad-flag.txt"
for bad in bad-value bad-flag; do
  if az_judge "$WORK/$bad.txt" > /dev/null 2>&1; then fail "the az judge took a mutated plan ($bad)"; fi
done
az_judge "$WORK/plan.txt" "$WORK/plan-kv.txt" "$WORK/plan-kv-policy.txt" "$WORK/plan-uniform.txt"

# --- cloud-init judges the custom data -----------------------------------------------------------
sed -e '0,/^    content: /s//    contents: /' "$WORK/clients.yaml" > "$WORK/bad-ci.yaml"
if "$CLOUDINIT" schema --config-file "$WORK/bad-ci.yaml" > /dev/null 2>&1; then
  fail "cloud-init took custom data with a misspelt key"
fi
for f in clients.yaml clients-kv.yaml; do
  "$CLOUDINIT" schema --config-file "$WORK/$f" > "$WORK/ci.out" 2>&1 || { cat "$WORK/ci.out" >&2; fail "cloud-init refuses $f"; }
done

# --- kustomize builds every kustomization; kubernetes-validate judges every object --------------
k8s_judge() {  # DEPLOY-DIR: builds and validates every kustomization in a copy with a token
  local root=$1 k dir out n=0
  printf 'dG9rZW4K\n' > "$root/k8s/token"
  printf 'dG9rZW4K\n' > "$root/k8s-paths/token"
  while IFS= read -r k; do
    dir=$(dirname "$k")
    out="$WORK/rendered-$(basename "$dir").yaml"; n=$((n + 1))
    "$KUSTOMIZE" build "$dir" > "$out" || { echo "check-deploy: kustomize build ${dir#"$root"/} failed" >&2; return 1; }
    for v in "${K8S_VERSIONS[@]}"; do
      "$KVALIDATE" --strict --quiet -k "$v" "$out" >&2 || { echo "check-deploy: ${dir#"$root"/}: invalid for Kubernetes $v" >&2; return 1; }
    done
  done < <(find "$root" -name kustomization.yaml | sort)
  for v in "${K8S_VERSIONS[@]}"; do
    "$KVALIDATE" --strict --quiet -k "$v" "$root/k8s/coordinator-job.yaml" >&2 || return 1
  done
  echo "$n"
}
# The judges refuse an unknown field (beside the pod's containers) and a field at the wrong
# level (the StatefulSet's serviceName moved into its pod template).
for mutation in unknown-field wrong-level; do
  rm -rf "$WORK/bad"; cp -r deploy "$WORK/bad"
  python3 - "$WORK/bad/k8s/servers-statefulset.yaml" "$mutation" <<'PY'
import sys
path, mutation = sys.argv[1], sys.argv[2]
s = open(path).read()
if mutation == "unknown-field":
    t = s.replace("\n      containers:", "\n      containerz: []\n      containers:", 1)
else:
    line = next(l for l in s.splitlines() if l.startswith("  serviceName:"))
    t = s.replace(line + "\n", "", 1).replace("\n  template:\n", "\n  template:\n  " + line + "\n", 1)
assert t != s, mutation
open(path, "w").write(t)
PY
  if k8s_judge "$WORK/bad" > /dev/null 2>&1; then fail "kustomize and kubernetes-validate took a mutated manifest ($mutation)"; fi
done
rm -rf "$WORK/deploy"; cp -r deploy "$WORK/deploy"
built=$(k8s_judge "$WORK/deploy")

# --- The manifests agree with each other ---------------------------------------------------------
python3 - "$WORK" <<'PY'
import glob, sys, yaml

work = sys.argv[1]
def fail(msg):
    print(f"check-deploy: {msg}", file=sys.stderr)
    sys.exit(1)
docs = []
for path in sorted(glob.glob(f"{work}/rendered-*.yaml")):
    for d in yaml.safe_load_all(open(path)):
        if d:
            docs.append((path, d))
base = [d for p, d in docs if p.endswith("/rendered-k8s.yaml")]
job = yaml.safe_load(open("deploy/k8s/coordinator-job.yaml"))
kinds = {}
for d in base + [job]:
    kinds.setdefault(d["kind"], []).append(d)
secret = kinds["Secret"][0]["metadata"]["name"]
services = {d["metadata"]["name"]: d for d in kinds["Service"]}
workloads = kinds["DaemonSet"] + kinds["StatefulSet"] + kinds["Job"]
for w in workloads:
    name = w["metadata"]["name"]
    pod = w["spec"]["template"]
    labels = pod["metadata"]["labels"]
    sel = w["spec"].get("selector", {}).get("matchLabels", {})
    if any(labels.get(k) != v for k, v in sel.items()):
        fail(f"{name}: selector {sel} does not match its pods' labels {labels}")
    vols = {v["name"]: v for v in pod["spec"]["volumes"]}
    for ctr in pod["spec"]["containers"]:
        args = ctr["args"]
        if "--token-file=/etc/netblast/token" not in args:
            fail(f"{name}: no --token-file")
        mounts = {m["mountPath"]: m["name"] for m in ctr["volumeMounts"]}
        if vols[mounts["/etc/netblast"]]["secret"]["secretName"] != secret:
            fail(f"{name}: the token volume is not the Secret {secret}")
        if args[0] == "serve":
            port = next(a.split("=")[1] for a in args if a.startswith("--port="))
            ports = {p["name"]: p["containerPort"] for p in ctr["ports"]}
            if str(ports["data"]) != port:
                fail(f"{name}: serves on {port}, declares {ports['data']}")
            for flag, pname in (("--http=", "http"), ("--https=", "https")):
                given = [a[len(flag):] for a in args if a.startswith(flag)]
                if given and str(ports.get(pname)) != given[0]:
                    fail(f"{name}: {flag}{given[0]} but port {pname} is {ports.get(pname)}")
    if w["kind"] == "StatefulSet":
        svc = services.get(w["spec"]["serviceName"])
        if svc is None or svc["spec"].get("clusterIP") != "None":
            fail(f"{name}: serviceName is not a headless Service")
# Every Service selects some agents, and its target ports are named ports of them.
for sname, svc in services.items():
    sel = svc["spec"]["selector"]
    targets = [w for w in workloads if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())]
    if not targets:
        fail(f"Service {sname} selects no pods")
    named = {p["name"] for w in targets for c in w["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
    for p in svc["spec"]["ports"]:
        if p["targetPort"] not in named:
            fail(f"Service {sname}: targetPort {p['targetPort']} is not a port of its pods")
# The coordinator resolves exactly these Services, in their namespace.
ns = kinds["Namespace"][0]["metadata"]["name"]
for flag in ("--clients=", "--servers="):
    arg = next(a for a in job["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith(flag))
    host = arg[len(flag):].removeprefix("dns:").rsplit(":", 1)[0]
    sname, sns = host.split(".")[:2]
    if sname not in services or sns != ns or not host.endswith(".svc.cluster.local"):
        fail(f"coordinator {arg}: not a Service of namespace {ns}")
# It waits for as many servers as the StatefulSet runs (dns:NAME:PORT=N).
servers = next(a for a in job["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--servers="))
if servers.rpartition("=")[2] != str(kinds["StatefulSet"][0]["spec"]["replicas"]):
    fail(f"coordinator {servers}: waits for other than the StatefulSet's {kinds['StatefulSet'][0]['spec']['replicas']} servers")
# The hostnetwork variant: both agent kinds on the nodes' network, nothing else changed.
host = [d for p, d in docs if p.endswith("/rendered-k8s-hostnetwork.yaml")]
on_host = {d["metadata"]["name"] for d in host if d["kind"] in ("DaemonSet", "StatefulSet")
           and d["spec"]["template"]["spec"].get("hostNetwork") is True}
if on_host != {d["metadata"]["name"] for d in kinds["DaemonSet"] + kinds["StatefulSet"]} or len(host) != len(base):
    fail(f"hostnetwork variant: on the host network {sorted(on_host)}")
def templates(name):
    return [d for p, d in docs if p.endswith(f"/rendered-{name}.yaml") and d["kind"] in ("DaemonSet", "StatefulSet")]
# Ports: the two agent kinds never claim one port (on the nodes' network they share the node's).
claimed = {}
for w in kinds["DaemonSet"] + kinds["StatefulSet"]:
    for p in w["spec"]["template"]["spec"]["containers"][0]["ports"]:
        claimed.setdefault(p["containerPort"], []).append(w["metadata"]["name"])
if any(len(ws) > 1 for ws in claimed.values()):
    fail(f"agent kinds share ports: {claimed}")
# Client and server agents on nodes of their own role.
for w in kinds["DaemonSet"] + kinds["StatefulSet"]:
    r = w["spec"]["template"]["metadata"]["labels"]["netblast/role"]
    if w["spec"]["template"]["spec"].get("nodeSelector", {}).get("netblast.io/role") != r:
        fail(f"{w['metadata']['name']}: not kept to nodes labelled netblast.io/role={r}")
# restricted: what the Pod Security level asks of every container (the control-plane test has
# the apiserver's admission judge it too).
for w in templates("k8s-restricted"):
    spec = w["spec"]["template"]["spec"]
    psc = spec.get("securityContext", {})
    for c in spec["containers"]:
        sc = c.get("securityContext", {})
        ok = (psc.get("runAsNonRoot") is True and psc.get("seccompProfile", {}).get("type") == "RuntimeDefault"
              and sc.get("allowPrivilegeEscalation") is False and sc.get("capabilities", {}).get("drop") == ["ALL"]
              and not sc.get("capabilities", {}).get("add") and "--probe=tcpinfo" in c["args"])
        if not ok:
            fail(f"k8s-restricted: {w['metadata']['name']} is not restricted: {psc} {sc}")
# guaranteed: limits equal requests, whole CPUs.
for w in templates("k8s-guaranteed"):
    r = w["spec"]["template"]["spec"]["containers"][0]["resources"]
    if r.get("limits") != r.get("requests") or not str(r["requests"]["cpu"]).isdigit():
        fail(f"k8s-guaranteed: {w['metadata']['name']} resources {r}")
print(f"check-deploy: {len(docs)} Kubernetes objects in {len(glob.glob(f'{work}/rendered-*.yaml'))} kustomizations agree")
PY
# --- The path matrix: each path's agents are what its name says -----------------------------------
python3 - "$WORK" <<'PY'
import sys, tomllib, yaml

work = sys.argv[1]
def fail(msg):
    print(f"check-deploy: k8s-paths: {msg}", file=sys.stderr)
    sys.exit(1)
docs = [d for d in yaml.safe_load_all(open(f"{work}/rendered-k8s-paths.yaml")) if d]
ns = next(d["metadata"]["name"] for d in docs if d["kind"] == "Namespace")
deps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
services = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Service"}
campaign_text = open("deploy/k8s-paths/paths.toml").read()
shipped = next(d for d in docs if d["kind"] == "ConfigMap")["data"].get("paths.toml")
if shipped != campaign_text:
    fail("the ConfigMap does not hold paths.toml")
job = next(d for d in docs if d["kind"] == "Job")["spec"]["template"]["spec"]
if "/etc/netblast-paths/paths.toml" not in job["containers"][0]["args"]:
    fail("the Job does not run the shipped campaign")
campaign = tomllib.loads(campaign_text)
def agent(entry, flag):
    """The Deployment a `dns:NAME.NS.svc.cluster.local:PORT=1` entry reaches, and its Service."""
    if not (entry.startswith("dns:") and entry.endswith("=1")):
        fail(f"{flag} {entry}: not one agent by name (dns:NAME:PORT=1)")
    host, port = entry[4:-2].rsplit(":", 1)
    name, in_ns = host.split(".")[:2]
    svc = services.get(name)
    if svc is None or in_ns != ns or not host.endswith(".svc.cluster.local"):
        fail(f"{flag} {entry}: not a Service of namespace {ns}")
    if svc["spec"]["ports"][0]["port"] != int(port):
        fail(f"{flag} {entry}: the Service's first port is not {port}")
    sel = svc["spec"]["selector"]
    picked = [d for d in deps.values() if all(d["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in sel.items())]
    if len(picked) != 1 or picked[0]["spec"]["replicas"] != 1:
        fail(f"Service {name} selects {len(picked)} Deployments: one agent of one pod, or a test's connections land apart")
    d = picked[0]
    c = d["spec"]["template"]["spec"]["containers"][0]
    serves = next(a.split("=")[1] for a in c["args"] if a.startswith("--port="))
    if str(c["ports"][0]["containerPort"]) != serves:
        fail(f"{d['metadata']['name']}: serves on {serves}, declares {c['ports'][0]['containerPort']}")
    if svc["spec"].get("clusterIP") == "None" and port != serves:
        fail(f"{flag} {entry}: its agent serves on {serves}")
    # A flow's own ports (--flow-ports LO-HI): the pod declares them, the Service forwards them.
    given = [a.split("=")[1] for a in c["args"] if a.startswith("--flow-ports=")]
    flows = []
    if given:
        lo, _, hi = given[0].partition("-")
        flows = list(range(int(lo), int(hi or lo) + 1))
        declared = {p["containerPort"] for p in c["ports"]}
        forwarded = {p["port"] for p in svc["spec"]["ports"]}
        if not set(flows) <= declared or not set(flows) <= forwarded:
            fail(f"{name}: --flow-ports {given[0]}: the pod declares {sorted(declared)}, the Service forwards {sorted(forwarded)}")
    return d, svc, flows
# What each path must be: (client on the node's network, server on it, through a ClusterIP).
want = {"pod-to-pod": (False, False, False), "same-node": (False, False, False),
        "service": (False, False, True), "pod-to-host": (False, True, False), "host-to-host": (True, True, False)}
paths = campaign["axes"]["path"]
if [p["name"] for p in paths] != list(want):
    fail(f"paths {[p['name'] for p in paths]}, expected {list(want)} (the first is every path's baseline)")
for p in paths:
    (cd, _, _), (sd, svc, flows) = agent(p["clients"], "clients"), agent(p["servers"], "servers")
    for t in campaign["axes"]["test"]:
        if t.get("profile") == "cps" and not 0 < t.get("flows", 10**6) <= len(flows):
            fail(f"path {p['name']}: cps with {t.get('flows', 'one per CPU')} flows, its server holds {len(flows)} flow ports")
    on_host = lambda d: d["spec"]["template"]["spec"].get("hostNetwork") is True
    got = (on_host(cd), on_host(sd), svc["spec"].get("clusterIP") != "None")
    if got != want[p["name"]]:
        fail(f"path {p['name']}: client on host {got[0]}, server on host {got[1]}, through a ClusterIP {got[2]}")
    spec = cd["spec"]["template"]["spec"]
    beside = spec.get("affinity", {}).get("podAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution", [])
    server_labels = sd["spec"]["template"]["metadata"]["labels"]
    near = any(all(server_labels.get(k) == v for k, v in t["labelSelector"]["matchLabels"].items()) for t in beside)
    if (p["name"] == "same-node") != near:
        fail(f"path {p['name']}: its client is {'' if near else 'not '}kept beside its server")
    if p["name"] != "same-node" and spec.get("nodeSelector", {}).get("netblast.io/role") != "client":
        fail(f"path {p['name']}: its client is not kept to client nodes")
print(f"check-deploy: k8s-paths: {len(paths)} paths, each with its agents and Services")
PY
echo "check-deploy: deploy.sh plans, their az commands, custom data (cloud-init) and $built kustomizations (kustomize, Kubernetes ${K8S_VERSIONS[*]}) pass"
