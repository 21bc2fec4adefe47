//! The manifests run on real nodes: `scripts/k8s-cluster.sh` starts a cluster here (the control
//! plane, CoreDNS, and five nodes, each in a network namespace of its own with containerd, runc,
//! the bridge CNI, a kubelet and kube-proxy), `scripts/image.py` builds the image of the netblast
//! this suite built, and each kustomization runs as shipped, with only the image reference set by
//! an overlay: the agents' DaemonSet and the servers' StatefulSet become Ready, the coordinator
//! Job runs its 2 × 2 fleet test through the headless Services and completes, and the result it
//! prints merges exactly what the agents counted and what the server nodes' interfaces carried.
//!
//! The judge fails what breaks only at run time (the scheduler cannot see it): an image that is
//! not there, a port below 1024 without the capability to bind it, a host port a process of the
//! node already holds. Root only; SKIP with the reason where a tool is missing.

use crate::{Tools, render, tools};
use netblast_spec::result::RunResult;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The image's tag in the cluster (every node imports it: never pulled).
const TAG: &str = "suite";
/// The namespace the manifests and the Job's DNS names use.
const NS: &str = "netblast";
/// Waiting reasons that will not resolve by themselves.
const STUCK: [&str; 6] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "CrashLoopBackOff",
    "CreateContainerError",
    "RunContainerError",
    "InvalidImageName",
];

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts").join(name)
}

/// A real cluster, taken down (`k8s-cluster.sh down`: processes, mounts, namespaces, bridge,
/// cgroups, sysctls) and its directory removed on drop, panics included.
pub struct Real {
    /// The test's directory: the images, and the cluster's directory.
    top: PathBuf,
    dir: PathBuf,
    kubectl: PathBuf,
}

impl Drop for Real {
    fn drop(&mut self) {
        let _ = Command::new(script("k8s-cluster.sh")).arg("down").arg(&self.dir).stderr(Stdio::null()).status();
        let _ = std::fs::remove_dir_all(&self.top);
    }
}

impl Real {
    /// The cluster with this suite's netblast as its image, or why not.
    fn start(t: &Tools) -> Result<Real, String> {
        for need in ["kubelet", "kube-proxy", "coredns"] {
            if !t.bin.join(need).is_file() {
                return Err(format!("{} is not built (scripts/k8s-build.sh)", t.bin.join(need).display()));
            }
        }
        for need in ["containerd", "runc", "ctr"] {
            if crate::on_path(need).is_none() {
                return Err(format!("{need} is not installed (Debian: containerd, runc; scripts/setup.sh)"));
            }
        }
        if !Path::new("/usr/lib/cni/bridge").is_file() {
            return Err("the CNI plugins are not installed (Debian: containernetworking-plugins)".into());
        }
        let dir = std::env::temp_dir().join(format!("nb-k8s-nodes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // Armed before anything is made: a failure below still takes everything down.
        let c = Real { dir: dir.join("cluster"), top: dir.clone(), kubectl: t.bin.join("kubectl") };
        let images = dir.join("images");
        for (what, extra) in
            [("netblast", vec!["--binary", env!("CARGO_BIN_EXE_netblast"), "--tag"]), ("pause", vec![])]
        {
            let mut cmd = Command::new(script("image.py"));
            cmd.arg(what).args(&extra);
            if what == "netblast" {
                cmd.arg(format!("netblast:{TAG}"));
            }
            let out = cmd.arg("--out").arg(images.join(format!("{what}.tar"))).output().unwrap();
            assert!(out.status.success(), "image.py {what}: {}", String::from_utf8_lossy(&out.stderr));
        }
        let out = Command::new(script("k8s-cluster.sh"))
            .arg("up")
            .arg(&c.dir)
            .arg(images.join("netblast.tar"))
            .arg(images.join("pause.tar"))
            .env("NETBLAST_TOOLS", t.bin.parent().unwrap().parent().unwrap())
            .output()
            .unwrap();
        assert!(out.status.success(), "k8s-cluster.sh up: {}", String::from_utf8_lossy(&out.stderr));
        Ok(c)
    }

    fn kubectl_out(&self, args: &[&str]) -> Result<String, String> {
        crate::kubectl(&self.kubectl, &self.dir.join("kubeconfig"), args)
    }

    fn json(&self, args: &[&str]) -> Value {
        crate::kubectl_json(&self.kubectl, &self.dir.join("kubeconfig"), args)
    }

    /// Applies `variant` (with the image overlay and `patches`) and waits for its Job: the
    /// fleet's result, or the first thing that broke at run time, named with its pod.
    fn run(&self, t: &Tools, variant: &str, tag: &str, patches: &str) -> Result<RunResult, String> {
        let outcome = self.apply(t, variant, tag, patches);
        self.clear();
        outcome
    }

    /// [`Real::run`] without the clearing: the agents stay up (their metrics) until [`Real::clear`].
    fn apply(&self, t: &Tools, variant: &str, tag: &str, patches: &str) -> Result<RunResult, String> {
        let overlay = format!("images:\n  - name: netblast\n    newName: netblast\n    newTag: {tag}\n{patches}");
        let file = render(t, &self.dir, variant, NS, &overlay);
        let applied = self.kubectl_out(&["apply", "-f", &file.display().to_string()]);
        applied.and_then(|_| self.judge(Duration::from_secs(180)))
    }

    /// The namespace gone: its pods hold the nodes' CPUs and ports, the next variant needs them.
    fn clear(&self) {
        self.kubectl_out(&["delete", "namespace", NS, "--wait=true", "--timeout=120s"])
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn judge(&self, limit: Duration) -> Result<RunResult, String> {
        let t0 = Instant::now();
        loop {
            let job = self.json(&["-n", NS, "get", "job", "netblast-fleet"]);
            let logs = || self.kubectl_out(&["-n", NS, "logs", "job/netblast-fleet"]).unwrap_or_else(|e| e);
            if job["status"]["succeeded"].as_u64() == Some(1) {
                let text = logs();
                if text.trim_end().lines().count() != 1 {
                    return Err(format!(
                        "the Job's result is not one line (--compact): {} lines",
                        text.lines().count()
                    ));
                }
                return serde_json::from_str(&text).map_err(|e| format!("the Job's log is not a result ({e}): {text}"));
            }
            if job["status"]["failed"].as_u64().unwrap_or(0) > 0 {
                return Err(format!("the coordinator Job failed: {}", logs()));
            }
            if let Some(why) = self.stuck() {
                return Err(why);
            }
            if t0.elapsed() > limit {
                let pods = self.kubectl_out(&["-n", NS, "get", "pods", "-o", "wide"]).unwrap_or_else(|e| e);
                return Err(format!("the Job did not complete in {limit:?}:\n{pods}"));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }

    /// A pod that will not come up by itself: a container stuck waiting (an image that is not
    /// there, a crash loop) or exited with an error, with the end of its log.
    fn stuck(&self) -> Option<String> {
        let pods = self.json(&["-n", NS, "get", "pods"]);
        for p in pods["items"].as_array().into_iter().flatten() {
            let name = p["metadata"]["name"].as_str().unwrap_or("?");
            for c in p["status"]["containerStatuses"].as_array().into_iter().flatten() {
                let waiting = &c["state"]["waiting"];
                let exited = [&c["state"]["terminated"], &c["lastState"]["terminated"]]
                    .into_iter()
                    .find(|t| t["exitCode"].as_i64().is_some_and(|code| code != 0));
                if let Some(reason) = waiting["reason"].as_str().filter(|r| STUCK.contains(r)) {
                    return Some(format!("{name}: {reason}: {}", waiting["message"].as_str().unwrap_or("")));
                }
                if let Some(t) = exited {
                    let log: Vec<String> = [vec!["logs", name], vec!["logs", name, "--previous"]]
                        .iter()
                        .filter_map(|a| self.kubectl_out(&[&["-n", NS][..], a].concat()).ok())
                        .filter(|l| !l.contains("unable to retrieve container logs"))
                        .collect();
                    let log = log.join("\n");
                    return Some(format!("{name}: exited {}: {}", t["exitCode"], log.trim()));
                }
            }
        }
        None
    }
}

/// Bytes received on a node's interface to the bridge (pod and host-network traffic alike).
fn node_rx(node: &str) -> u64 {
    let out = Command::new("ip").args(["-n", &format!("nbk8s-{node}"), "-s", "-j", "link", "show", "eth0"]).output();
    let v: Value = serde_json::from_slice(&out.unwrap().stdout).unwrap_or_default();
    v[0]["stats64"]["rx"]["bytes"].as_u64().unwrap_or_else(|| panic!("no counters for {node}'s eth0: {v}"))
}

/// A fleet result of two clients and two servers, merged exactly, that the server nodes'
/// interfaces agree with; its TCP statistics' source named.
fn check_result(variant: &str, r: &RunResult, server_rx: u64, source: &str) {
    assert!(r.complete && r.errors.is_empty(), "{variant}: {:?}", r.errors);
    assert_eq!(r.agents.len(), 4, "{variant}: agents");
    assert_eq!(r.agents.iter().filter(|a| a.role == "client").count(), 2, "{variant}: two client agents");
    assert!(r.agents.iter().all(|a| a.status == "ok"), "{variant}: {:?}", r.agents);
    assert_eq!(r.parts.len(), 4, "{variant}: 2 clients × 2 servers");
    let recv = crate::util::merged_exactly(variant, r);
    assert!(recv > 0);
    // The server nodes' interfaces carried the payload plus headers (and the little else a node
    // receives: probes, the coordinator's frames when it runs there).
    assert!(server_rx >= recv, "{variant}: server nodes received {server_rx} B < payload {recv} B");
    assert!(server_rx as f64 <= recv as f64 * 1.08 + 16e6, "{variant}: server nodes {server_rx} B vs payload {recv} B");
    let probe = &r.probe;
    assert!(
        probe.tcp_source == "tcp_info" && probe.fallback_reason.as_deref().unwrap_or("").contains(source),
        "{variant}: {probe:?}"
    );
}

#[test]
fn the_manifests_run_on_real_nodes() {
    let _one = crate::ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner());
    let t = match tools() {
        Ok(t) => t,
        Err(why) => {
            crate::util::skipped("the Kubernetes real-node test", &why);
            return;
        }
    };
    // Root: network namespaces (and mounts, cgroups).
    if !crate::util::netns_or_skip("the Kubernetes real-node test") {
        return;
    }
    let c = match Real::start(&t) {
        Ok(c) => c,
        Err(why) => {
            crate::util::skipped("the Kubernetes real-node test", &why);
            return;
        }
    };
    let servers = ["server-1", "server-2"];
    // The eBPF probe cannot attach in these pods (no cgroup v2 inside them, cgroup v1 here): the
    // agents say so; the restricted variant never tries.
    let prometheus = Prometheus::start(&c, &t);
    for (variant, source) in [
        ("k8s", "cgroup v2"),
        ("k8s-restricted", "--probe tcpinfo"),
        ("k8s-guaranteed", "cgroup v2"),
        ("k8s-hostnetwork", "cgroup v2"),
    ] {
        let before: u64 = servers.iter().map(|n| node_rx(n)).sum();
        let started = Instant::now();
        let r = c.apply(&t, variant, TAG, "").unwrap_or_else(|e| panic!("{variant}: {e}"));
        let after: u64 = servers.iter().map(|n| node_rx(n)).sum();
        check_result(variant, &r, after - before, source);
        // Prometheus found every agent and its last samples are the result's.
        if let Some(p) = &prometheus {
            p.agrees(&r).unwrap_or_else(|e| panic!("{variant}: Prometheus: {e}"));
        }
        c.clear();
        eprintln!("{variant}: ran in {:.0?}", started.elapsed());
    }
    paths(&c);
    // What breaks only at run time, each named with its pod.
    let e = c.run(&t, "k8s", "no-such-tag", "").expect_err("an image that is not there");
    assert!(e.contains("ErrImagePull") || e.contains("ImagePullBackOff"), "{e}");
    eprintln!("judged: {e}");
    let low_port = "patches:\n  - target:\n      kind: StatefulSet\n    patch: |\n      \
                    - op: replace\n        path: /spec/template/spec/containers/0/args/3\n        value: --http=80\n";
    let e = c.run(&t, "k8s-restricted", TAG, low_port).expect_err("port 80 without NET_BIND_SERVICE");
    assert!(e.contains("netblast-server-") && e.contains("exited") && e.contains("ermission denied"), "{e}");
    eprintln!("judged: {e}");
    // A process of server-1 holds the servers' data port: the scheduler sees only pods' ports.
    let squatter = crate::util::KillOnDrop(
        Command::new("ip")
            .args(["netns", "exec", "nbk8s-server-1", "python3", "-c"])
            .arg("import socket,time; s=socket.socket(); s.bind(('0.0.0.0',5220)); s.listen(); time.sleep(300)")
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(500));
    let e = c.run(&t, "k8s-hostnetwork", TAG, "").expect_err("a host port already held");
    assert!(e.contains("netblast-server-") && e.contains("in use"), "{e}");
    eprintln!("judged: {e}");
    drop(squatter);
}

/// The cluster's path matrix, one command as shipped (`scripts/k8s-paths.sh`, from a copy of
/// the repository's deploy/ and the script: it makes the token beside the kustomization): every
/// path and test runs, each path is compared with pod to pod, an rr flow's two ends never share
/// a core (a pod on the server's node included: its boot id says so), and the namespace is gone.
fn paths(c: &Real) {
    let started = Instant::now();
    let repo = c.top.join("repo");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::create_dir_all(repo.join("scripts")).unwrap();
    assert!(Command::new("cp").arg("-r").arg(root.join("deploy")).arg(&repo).status().unwrap().success());
    std::fs::copy(script("k8s-paths.sh"), repo.join("scripts/k8s-paths.sh")).unwrap();
    let out_dir = c.top.join("paths");
    let out = Command::new(repo.join("scripts/k8s-paths.sh"))
        .arg("-o")
        .arg(&out_dir)
        .args(["--image", &format!("netblast:{TAG}"), "--set", "duration=1s", "--repeats", "2"])
        .env("KUBECONFIG", c.dir.join("kubeconfig"))
        .env("KUBECTL", &c.kubectl)
        .env("NETBLAST", env!("CARGO_BIN_EXE_netblast"))
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "k8s-paths.sh: {said}");
    let s: netblast_spec::campaign::summary::Summary =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!((s.runs.done, s.runs.failed, s.cells.len()), (30, 0, 15), "{said}");
    for cell in &s.cells {
        let want = match cell.settings["test"].to_string().as_str() {
            "throughput" => "bulk",
            "latency" => "rr",
            _ => "cps",
        };
        assert_eq!((cell.n, cell.kind.as_deref()), (2, Some(want)), "{}", cell.name);
        if want == "rr" {
            // Busy-polling ends on one core take turns by scheduler tick: milliseconds.
            let p50 = cell.figures["p50"].median;
            assert!(p50 < 1e6, "{}: rr p50 {p50} ns", cell.name);
        }
    }
    assert_eq!(s.comparisons.iter().filter(|x| x.axis == "path").count(), 12, "4 paths × 3 tests against pod to pod");
    assert!(s.comparisons.iter().all(|x| x.axis != "test"), "a rate of one kind is no baseline for another");
    for line in ["path=service vs pod-to-pod at test=throughput: throughput ", "at test=latency: msgs "] {
        assert!(said.contains(line), "the report says {line:?}: {said}");
    }
    let gone = c.kubectl_out(&["get", "namespace", "netblast-paths"]);
    assert!(gone.is_err(), "the namespace is deleted: {gone:?}");
    eprintln!("path matrix: ran in {:.0?}\n{said}", started.elapsed());
}

/// Prometheus with its Kubernetes discovery (built by `scripts/k8s-build.sh`: Debian's is built
/// without it), scraping with the shipped `deploy/prometheus/kubernetes-sd.yml` from outside the
/// cluster (the one line added: the kubeconfig).
struct Prometheus {
    _proc: crate::util::KillOnDrop,
    at: String,
}

impl Prometheus {
    fn start(c: &Real, t: &Tools) -> Option<Prometheus> {
        let bin = t.bin.join("prometheus");
        if !bin.is_file() {
            crate::util::skipped(
                "Prometheus' Kubernetes discovery",
                &format!("{} is not built (scripts/k8s-build.sh)", bin.display()),
            );
            return None;
        }
        let shipped = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/prometheus/kubernetes-sd.yml"),
        )
        .unwrap();
        let kubeconfig =
            format!("      - role: pod\n        kubeconfig_file: {}\n", c.dir.join("kubeconfig").display());
        assert!(shipped.contains("      - role: pod\n"), "{shipped}");
        let config = c.dir.join("prometheus.yml");
        std::fs::write(&config, shipped.replace("      - role: pod\n", &kubeconfig)).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let at = format!("127.0.0.1:{port}");
        let log = std::fs::File::create(c.dir.join("prometheus.log")).unwrap();
        let child = Command::new(&bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", c.dir.join("prometheus").display()))
            .arg(format!("--web.listen-address={at}"))
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let p = Prometheus { _proc: crate::util::KillOnDrop(child), at };
        let t0 = Instant::now();
        while p.get("/-/ready", None).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(60),
                "Prometheus not ready: {}",
                std::fs::read_to_string(c.dir.join("prometheus.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
        Some(p)
    }

    /// `GET path` (with `query`, URL-encoded by curl, when given).
    fn get(&self, path: &str, query: Option<&str>) -> Result<String, String> {
        let mut curl = Command::new("curl");
        curl.args(["-sf", "--max-time", "5"]).arg(format!("http://{}{path}", self.at));
        if let Some(q) = query {
            curl.args(["-G", "--data-urlencode"]).arg(format!("query={q}"));
        }
        match curl.output() {
            Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
            Ok(o) => Err(format!("curl {path}: {}", o.status)),
            Err(e) => Err(format!("curl: {e}")),
        }
    }

    /// One number from an instant query (0 when it has no series).
    fn value(&self, query: &str) -> Result<f64, String> {
        let v: Value = serde_json::from_str(&self.get("/api/v1/query", Some(query))?).map_err(|e| e.to_string())?;
        let first = &v["data"]["result"][0]["value"][1];
        Ok(first.as_str().map(|x| x.parse().unwrap_or(f64::NAN)).unwrap_or(0.0))
    }

    /// Every agent of the fleet scraped, and the servers' received bytes as the result counts
    /// them, within a minute (a scrape every 5 s).
    fn agrees(&self, r: &RunResult) -> Result<(), String> {
        let want = r.parts.iter().map(|p| p.summary.ways[0].receiver.unwrap().bytes).sum::<u64>() as f64;
        let t0 = Instant::now();
        loop {
            let up = self.value(r#"count(up{job="netblast"} == 1)"#)?;
            let servers = self.value(r#"count(up{job="netblast",role="server"} == 1)"#)?;
            let got =
                self.value(r#"sum(netblast_serve_bytes_total{job="netblast",role="server",direction="received"})"#)?;
            if up == r.agents.len() as f64 && servers == 2.0 && got == want {
                eprintln!("Prometheus: {up} agents scraped, servers received {got} B, the result {want} B");
                return Ok(());
            }
            if t0.elapsed() > Duration::from_secs(60) {
                return Err(format!(
                    "{up} agents up ({servers} servers) of {}; servers received {got} B, the result {want} B",
                    r.agents.len()
                ));
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    }
}
