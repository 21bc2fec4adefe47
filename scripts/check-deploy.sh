#!/usr/bin/env bash
# Checks the deployment files that cannot be tried here (no Azure, no cluster): the scripts lint
# clean (shellcheck), deploy.sh --dry-run prints the seed's layout and renders custom data
# that parses as cloud-config, and the Kubernetes manifests parse and agree with each other
# (selectors and labels, ports, the Secret, the Services the coordinator resolves).
set -euo pipefail
cd "$(dirname "$0")/.."

shellcheck -S warning scripts/*.sh scripts/azure/*.sh

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
printf 'a-token\n' > "$WORK/token"

# Bad input is refused with exit 2, naming what is wrong.
if out=$(scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url ftp://x --token-file "$WORK/token" --dry-run 2>&1); then
  echo "check-deploy: deploy.sh took an ftp URL" >&2; exit 1
fi
case "$out" in *"--netblast-url"*) ;; *) echo "check-deploy: unclear error: $out" >&2; exit 1 ;; esac

scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url https://example.invalid/netblast \
  --token-file "$WORK/token" --clients 30 --servers 20 --client-size Standard_D4_v4 --server-size Standard_D8_v4 \
  --allow 10.60.0.0/16 --dry-run --render "$WORK/clients.yaml" > "$WORK/plan.txt"
scripts/azure/deploy.sh --rg perf --location westeurope --netblast-url https://example.invalid/netblast \
  --keyvault kv1 --secret nbtoken --register 10.50.3.4:5300 --dry-run > "$WORK/plan-kv.txt"

python3 - "$WORK" <<'PY'
import base64, glob, os, shlex, sys, yaml

work = sys.argv[1]
def fail(msg):
    print(f"check-deploy: {msg}", file=sys.stderr)
    sys.exit(1)

# --- Azure: the dry-run plan -------------------------------------------------------------
cmds = [shlex.split(l[2:]) for l in open(f"{work}/plan.txt") if l.startswith("+ ")]
def opt(cmd, name):
    return cmd[cmd.index(name) + 1] if name in cmd else None
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
subnets = {opt(x, "--subnet-name") or opt(x, "--name"): opt(x, "--subnet-prefixes") or opt(x, "--address-prefixes")
           for x in cmds if x[:3] == ["az", "network", "vnet"]}
if subnets.get("clients") != "10.50.1.0/24" or subnets.get("servers") != "10.50.2.0/24":
    fail(f"subnets: {subnets}")
plan = open(f"{work}/plan.txt").read()
if "--clients azure:vmss=netblast-clients,rg=perf --servers azure:vmss=netblast-servers,rg=perf" not in plan:
    fail("the plan does not end with the fleet command for its scale sets")
kv = open(f"{work}/plan-kv.txt").read()
if kv.count("az keyvault set-policy --name kv1") != 2 or "registered:clients:2" not in kv:
    fail("the Key Vault plan grants each scale set's identity, and the fleet waits for registrations")

# --- Azure: the rendered custom data ----------------------------------------------------
raw = open(f"{work}/clients.yaml").read()
if not raw.startswith("#cloud-config") or "@" in raw.replace("@PLACEHOLDERS@", ""):
    fail("custom data: not cloud-config, or a placeholder was left")
ci = yaml.safe_load(raw)
files = {f["path"]: f for f in ci["write_files"]}
if base64.b64decode(files["/etc/netblast/token"]["content"]) != b"a-token":
    fail("custom data: the token does not round-trip")
unit = files["/etc/systemd/system/netblast-agent.service"]["content"]
execs = [l for l in unit.splitlines() if l.startswith("ExecStart=")]
if execs != ["ExecStart=/usr/local/bin/netblast serve --token-file /etc/netblast/token --allow 10.60.0.0/16"]:
    fail(f"custom data: {execs}")
if "LimitNOFILE=" not in unit or not any("systemctl enable --now netblast-agent" in r for r in ci["runcmd"]):
    fail("custom data: the service is not enabled, or has no descriptor limit")

# --- Kubernetes ---------------------------------------------------------------------------
docs = []
for path in sorted(glob.glob("deploy/k8s/*.yaml")):
    for d in yaml.safe_load_all(open(path)):
        if d:
            docs.append((path, d))
kinds = {}
for path, d in docs:
    for key in ("apiVersion", "kind"):
        if key not in d:
            fail(f"{path}: no {key}")
    kinds.setdefault(d["kind"], []).append(d)
kust = next(d for _, d in docs if d["kind"] == "Kustomization")
listed = set(kust["resources"])
on_disk = {os.path.basename(p) for p, d in docs if d["kind"] not in ("Kustomization", "Job")}
if listed != on_disk:
    fail(f"kustomization resources {sorted(listed)} != manifests {sorted(on_disk)}")
secret = kust["secretGenerator"][0]["name"]
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
# The coordinator resolves exactly these Services, in this namespace.
job = kinds["Job"][0]
ns = kust["namespace"]
for flag in ("--clients=", "--servers="):
    arg = next(a for a in job["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith(flag))
    host = arg[len(flag):].removeprefix("dns:").rsplit(":", 1)[0]
    sname, sns = host.split(".")[:2]
    if sname not in services or sns != ns or not host.endswith(".svc.cluster.local"):
        fail(f"coordinator {arg}: not a Service of namespace {ns}")
over = yaml.safe_load(open("deploy/k8s/hostnetwork/kustomization.yaml"))
patched = {p["target"]["name"] for p in over["patches"]}
if patched != {w["metadata"]["name"] for w in kinds["DaemonSet"] + kinds["StatefulSet"]}:
    fail(f"hostnetwork overlay patches {patched}")
print(f"check-deploy: deploy.sh plan, custom data and {len(docs)} Kubernetes documents agree")
PY
