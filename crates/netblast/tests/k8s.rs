//! The Kubernetes manifests (`deploy/k8s*`) judged two ways. Here, by a real control plane:
//! etcd, and kube-apiserver, kube-controller-manager and kube-scheduler of Kubernetes 1.34 (built
//! by `scripts/k8s-build.sh`; SKIP with the reason where they or etcd are missing), with Node
//! objects the test makes, to see every variant's placement on four nodes quickly: the test makes four Node objects (two labelled `netblast.io/role=client`, two `server`),
//! applies each kustomization with the coordinator Job in a namespace of its own, and waits for
//! the controllers to create the pods and the scheduler to place them.
//!
//! Asserted for every variant: every pod the DaemonSet, the StatefulSet and the Job ask for is
//! created (admission, Pod Security included, took it) and bound to a node; none was refused
//! for ports; no node holds both a client agent and a server. And the judge can fail: the
//! host-network layout before issue 43 (both agent kinds on port 5210, on every node) leaves
//! pods unscheduled for want of free ports.
//!
//! And in `k8s_nodes`, on real nodes that run the pods (kubelet, containerd, runc, CNI).
//!
//! A binary of its own: the control plane takes a CPU and about 1 GB while it runs.

use serde_json::Value;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use util::KillOnDrop as Proc;

// Shared with the integration binary; this one uses its KillOnDrop.
mod k8s_nodes;
#[allow(dead_code, unused_imports)]
mod util;

/// One cluster at a time: the real one has fixed names and addresses, and both want the CPUs.
static ONE_CLUSTER: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The programs the test runs, or why it cannot.
struct Tools {
    bin: PathBuf,
    etcd: PathBuf,
    kustomize: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(name)).find(|p| p.is_file())
}

fn tools() -> Result<Tools, String> {
    let home = std::env::var("HOME").unwrap_or_default();
    let root = std::env::var("NETBLAST_TOOLS").unwrap_or(format!("{home}/.local/share/netblast-tools"));
    let bin = PathBuf::from(root).join("k8s/bin");
    for c in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"] {
        if !bin.join(c).is_file() {
            return Err(format!(
                "{} is not built (scripts/k8s-build.sh; scripts/setup.sh runs it)",
                bin.join(c).display()
            ));
        }
    }
    let etcd = on_path("etcd").ok_or("etcd is not installed (Debian: etcd-server; scripts/setup.sh)")?;
    let kustomize = on_path("kustomize")
        .or_else(|| Some(PathBuf::from(format!("{home}/go/bin/kustomize"))).filter(|p| p.is_file()))
        .ok_or("kustomize is not installed (scripts/setup.sh)")?;
    if on_path("openssl").is_none() {
        return Err("openssl is not installed".into());
    }
    Ok(Tools { bin, etcd, kustomize })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A control plane on loopback, stopped and its directory removed on drop.
struct Cluster {
    dir: PathBuf,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    // Stopped in reverse order of start: scheduler, controllers, apiserver, etcd.
    procs: Vec<Proc>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        while let Some(p) = self.procs.pop() {
            drop(p);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `kubectl ARGS` against `kubeconfig`: its stdout, or what it said on failure.
fn kubectl(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Result<String, String> {
    let out = Command::new(bin)
        .arg(format!("--kubeconfig={}", kubeconfig.display()))
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!("kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr)))
    }
}

/// `kubectl ARGS -o json`, parsed; a failure panics with what kubectl said.
fn kubectl_json(bin: &Path, kubeconfig: &Path, args: &[&str]) -> Value {
    let a = [args, &["-o", "json"]].concat();
    serde_json::from_str(&kubectl(bin, kubeconfig, &a).unwrap_or_else(|e| panic!("{e}"))).unwrap()
}

fn spawn(prog: &Path, args: &[String], log: &Path) -> Proc {
    let out = std::fs::File::create(log).unwrap();
    let child = Command::new(prog)
        .args(args)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{}: {e}", prog.display()));
    Proc(child)
}

fn tail(log: &Path) -> String {
    let s = std::fs::read_to_string(log).unwrap_or_default();
    s.lines().rev().take(15).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
}

impl Cluster {
    fn start(t: &Tools) -> Cluster {
        let dir = std::env::temp_dir().join(format!("nb-k8s-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("certs")).unwrap();
        let kubeconfig = dir.join("kubeconfig");
        let mut c =
            Cluster { dir: dir.clone(), kubeconfig: kubeconfig.clone(), kubectl: t.bin.join("kubectl"), procs: vec![] };
        let s = |p: &Path| p.display().to_string();
        let (etcd_port, peer_port, api_port) = (free_port(), free_port(), free_port());
        let etcd_url = format!("http://127.0.0.1:{etcd_port}");
        let etcd_log = dir.join("etcd.log");
        c.procs.push(spawn(
            &t.etcd,
            &[
                format!("--data-dir={}", s(&dir.join("etcd"))),
                format!("--listen-client-urls={etcd_url}"),
                format!("--advertise-client-urls={etcd_url}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}"),
                format!("--initial-cluster=default=http://127.0.0.1:{peer_port}"),
            ],
            &etcd_log,
        ));
        let key = dir.join("sa.key");
        let st = Command::new("openssl").args(["genrsa", "-out"]).arg(&key).arg("2048").stderr(Stdio::null()).status();
        assert!(st.unwrap().success(), "openssl genrsa");
        let token = "nb-admin-token-for-the-control-plane-test";
        std::fs::write(dir.join("tokens.csv"), format!("{token},admin,admin,system:masters\n")).unwrap();
        let api_log = dir.join("apiserver.log");
        c.procs.push(spawn(
            &t.bin.join("kube-apiserver"),
            &[
                format!("--etcd-servers={etcd_url}"),
                "--bind-address=127.0.0.1".into(),
                "--advertise-address=127.0.0.1".into(),
                format!("--secure-port={api_port}"),
                format!("--cert-dir={}", s(&dir.join("certs"))),
                format!("--token-auth-file={}", s(&dir.join("tokens.csv"))),
                "--authorization-mode=RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc".into(),
                format!("--service-account-key-file={}", s(&key)),
                format!("--service-account-signing-key-file={}", s(&key)),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
            ],
            &api_log,
        ));
        let server = format!("https://127.0.0.1:{api_port}");
        std::fs::write(
            &kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {server}\n    \
                 insecure-skip-tls-verify: true\nusers:\n- name: admin\n  user:\n    token: {token}\n\
                 contexts:\n- name: t\n  context:\n    cluster: t\n    user: admin\ncurrent-context: t\n"
            ),
        )
        .unwrap();
        let t0 = Instant::now();
        while c.kubectl_out(&["get", "--raw", "/readyz"]).map(|o| o.trim() != "ok").unwrap_or(true) {
            assert!(
                t0.elapsed() < Duration::from_secs(90),
                "kube-apiserver not ready in 90 s:\n{}\netcd:\n{}",
                tail(&api_log),
                tail(&etcd_log)
            );
            std::thread::sleep(Duration::from_millis(500));
        }
        let kc = format!("--kubeconfig={}", s(&kubeconfig));
        c.procs.push(spawn(
            &t.bin.join("kube-controller-manager"),
            &[
                kc.clone(),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
                format!("--service-account-private-key-file={}", s(&key)),
                format!("--root-ca-file={}", s(&dir.join("certs/apiserver.crt"))),
                // No kubelet heartbeats: the node lifecycle controller would taint every node
                // unreachable and evict what was placed.
                "--controllers=*,-node-lifecycle-controller".into(),
            ],
            &dir.join("controller-manager.log"),
        ));
        c.procs.push(spawn(
            &t.bin.join("kube-scheduler"),
            &[
                kc,
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()),
            ],
            &dir.join("scheduler.log"),
        ));
        c
    }

    fn kubectl_out(&self, args: &[&str]) -> Result<String, String> {
        kubectl(&self.kubectl, &self.kubeconfig, args)
    }

    fn kubectl(&self, args: &[&str]) -> String {
        self.kubectl_out(args).unwrap_or_else(|e| panic!("{e}"))
    }

    fn json(&self, args: &[&str]) -> Value {
        kubectl_json(&self.kubectl, &self.kubeconfig, args)
    }

    /// A Ready node with room for every variant's pods.
    fn add_node(&self, name: &str, role: &str) {
        let node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "netblast.io/role": role}},
        });
        let path = self.dir.join(format!("{name}.json"));
        std::fs::write(&path, node.to_string()).unwrap();
        self.kubectl(&["create", "-f", &path.display().to_string()]);
        let now = "2026-01-01T00:00:00Z";
        let status = serde_json::json!({"status": {
            "capacity": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "allocatable": {"cpu": "32", "memory": "128Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "made by the test", "lastHeartbeatTime": now, "lastTransitionTime": now}],
        }});
        self.kubectl(&["patch", "node", name, "--subresource=status", "--type=merge", "-p", &status.to_string()]);
        // Admission taints a new node not-ready until the node lifecycle controller sees its
        // kubelet's Ready condition; with no kubelet and that controller off, the test does it.
        self.kubectl(&["taint", "node", name, "node.kubernetes.io/not-ready:NoSchedule-"]);
    }
}

/// Renders `variant` (a kustomization under deploy/) with the coordinator Job into namespace
/// `ns`, with `patches` (kustomize JSON patches, YAML text) on top.
fn render(t: &Tools, work: &Path, variant: &str, ns: &str, patches: &str) -> PathBuf {
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    // A copy of deploy/ with a token, and beside the overlay a kustomization that puts it and
    // the Job in the namespace (kustomize takes only relative paths, under a common root).
    let copy = work.join(format!("{ns}-deploy"));
    let st = Command::new("cp").arg("-r").arg(&deploy).arg(&copy).status().unwrap();
    assert!(st.success());
    // As the manifests say to make it (32 random bytes, base64): agents refuse a short token.
    std::fs::write(copy.join("k8s/token"), "q0c5dWJ3Z2x5b2Fmc3h0bXZ5b2h3ZGVyYnVmYQ==\n").unwrap();
    let dir = copy.join("under-test");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(deploy.join("k8s/coordinator-job.yaml"), dir.join("job.yaml")).unwrap();
    let k = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: {ns}\nresources:\n  - \
         ../{variant}\n  - job.yaml\n{patches}"
    );
    std::fs::write(dir.join("kustomization.yaml"), k).unwrap();
    let out = Command::new(&t.kustomize).arg("build").arg(&dir).output().unwrap();
    assert!(out.status.success(), "kustomize build {variant}: {}", String::from_utf8_lossy(&out.stderr));
    let rendered = work.join(format!("{ns}.yaml"));
    std::fs::write(&rendered, out.stdout).unwrap();
    rendered
}

/// The pods of namespace `ns` and the scheduler's and controllers' warnings there, once the
/// pods asked for exist and are bound, or after `wait`.
fn settle(c: &Cluster, ns: &str, want: usize, wait: Duration) -> (Vec<Value>, Vec<String>) {
    let t0 = Instant::now();
    loop {
        let pods = c.json(&["-n", ns, "get", "pods"])["items"].as_array().cloned().unwrap_or_default();
        let bound = pods.iter().filter(|p| p["spec"]["nodeName"].is_string()).count();
        if (pods.len() >= want && bound == pods.len()) || t0.elapsed() > wait {
            let events = c.json(&["-n", ns, "get", "events"])["items"].as_array().cloned().unwrap_or_default();
            let warnings = events
                .iter()
                .filter(|e| e["type"] == "Warning")
                .map(|e| format!("{} {}: {}", e["involvedObject"]["name"], e["reason"], e["message"]))
                .collect();
            return (pods, warnings);
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn role(p: &Value) -> &str {
    p["metadata"]["labels"]["netblast/role"].as_str().unwrap_or("")
}

/// Applies `variant` in its own namespace and checks what the scheduler made of it.
fn check_variant(c: &Cluster, t: &Tools, variant: &str, servers: usize) {
    let ns = format!("nbt-{variant}");
    let file = render(t, &c.dir, variant, &ns, "");
    c.kubectl(&["apply", "-f", &file.display().to_string()]);
    // Two client agents (one per client node), the servers, the Job's pod.
    let want = 2 + servers + 1;
    let (pods, warnings) = settle(c, &ns, want, Duration::from_secs(90));
    let names = |pods: &[&Value]| pods.iter().map(|p| p["metadata"]["name"].to_string()).collect::<Vec<_>>();
    let unbound: Vec<&Value> = pods.iter().filter(|p| !p["spec"]["nodeName"].is_string()).collect();
    assert!(
        pods.len() == want && unbound.is_empty(),
        "{variant}: {} pods of {want}, unbound {:?}; warnings: {warnings:#?}",
        pods.len(),
        names(&unbound)
    );
    assert!(!warnings.iter().any(|w| w.contains("free ports")), "{variant}: pods refused for ports: {warnings:#?}");
    let nodes = |r: &str| {
        pods.iter()
            .filter(|p| role(p) == r)
            .map(|p| p["spec"]["nodeName"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    let (clients, on_servers) = (nodes("client"), nodes("server"));
    assert_eq!((clients.len(), on_servers.len()), (2, servers), "{variant}: pods by role");
    assert!(
        clients.iter().all(|n| n.starts_with("client-")) && on_servers.iter().all(|n| n.starts_with("server-")),
        "{variant}: clients on {clients:?}, servers on {on_servers:?}: each test must cross the network"
    );
    assert_eq!(nodes("coordinator").len(), 1, "{variant}: the coordinator Job's pod");
}

#[test]
fn the_manifests_schedule_on_a_real_control_plane() {
    let _one = ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let t = match tools() {
        Ok(t) => t,
        Err(why) => {
            util::skipped("the Kubernetes control-plane test", &why);
            return;
        }
    };
    let c = Cluster::start(&t);
    for (name, role) in [("client-1", "client"), ("client-2", "client"), ("server-1", "server"), ("server-2", "server")]
    {
        c.add_node(name, role);
    }
    // The judge fails the layout before issue 43: both agent kinds on port 5210 on the nodes'
    // network, on every node, servers not kept from clients.
    let old = "patches:\n  - target:\n      kind: StatefulSet\n      name: netblast-server\n    patch: |\n      \
               - op: remove\n        path: /spec/template/spec/nodeSelector\n      \
               - op: remove\n        path: /spec/template/spec/affinity\n      \
               - op: test\n        path: /spec/template/spec/containers/0/args/2\n        value: --port=5220\n      \
               - op: replace\n        path: /spec/template/spec/containers/0/args/2\n        value: --port=5210\n      \
               - op: replace\n        path: /spec/template/spec/containers/0/ports/0/containerPort\n        value: 5210\n  \
               - target:\n      kind: DaemonSet\n      name: netblast-agent\n    patch: |\n      \
               - op: remove\n        path: /spec/template/spec/nodeSelector\n";
    let file = render(&t, &c.dir, "k8s-hostnetwork", "nbt-before", old);
    c.kubectl(&["apply", "-f", &file.display().to_string()]);
    let t0 = Instant::now();
    loop {
        let (_, warnings) = settle(&c, "nbt-before", 4 + 2 + 1, Duration::ZERO);
        if warnings.iter().any(|w| w.contains("didn't have free ports")) {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the old host-network layout should leave pods without free ports: {warnings:#?}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    // Its pods hold the nodes' ports: gone before the variants (no kubelet to end them).
    c.kubectl(&["delete", "namespace", "nbt-before", "--wait=false"]);
    c.kubectl(&["-n", "nbt-before", "delete", "pods", "--all", "--grace-period=0", "--force"]);
    for (variant, servers) in [("k8s", 2), ("k8s-hostnetwork", 2), ("k8s-restricted", 2), ("k8s-guaranteed", 2)] {
        check_variant(&c, &t, variant, servers);
    }
}
