//! `netblast fleet` over agents in network namespaces (`scripts/testbed.sh`, root only), and
//! over agents that register on loopback.

use crate::util::{self, KillOnDrop};
use netblast_spec::RunResult;
use netblast_spec::hist::hist_of;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// A testbed made by `scripts/testbed.sh up`, removed on drop.
struct Testbed {
    id: u32,
    token: PathBuf,
    agents: Vec<String>,
    _one_at_a_time: std::sync::MutexGuard<'static, ()>,
}

/// Fleet tests run one at a time: each is a handful of processes moving gigabits on this
/// host's CPUs, and the start-skew checks measure scheduling.
static ONE_FLEET: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn one_fleet() -> std::sync::MutexGuard<'static, ()> {
    // The traffic lane first, then the fleet's lock: one order for every test that takes both
    // (a test that took this lock and then started a server waited for the lane while one that
    // held the lane waited for this lock).
    util::lane();
    ONE_FLEET.lock().unwrap_or_else(|e| e.into_inner())
}

fn script() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/testbed.sh"))
}

impl Testbed {
    /// `None` (after printing why) when namespaces cannot be made here.
    fn up(test: &str, id: u32, n: usize) -> Option<Testbed> {
        if !util::netns_or_skip(test) {
            return None;
        }
        let lock = one_fleet();
        let out = Command::new(script())
            .args(["up", &n.to_string(), "--id", &id.to_string()])
            .env("NETBLAST", env!("CARGO_BIN_EXE_netblast"))
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "testbed up: {}{}", text, String::from_utf8_lossy(&out.stderr));
        let token = PathBuf::from(text.lines().find_map(|l| l.strip_prefix("token: ")).expect("token line"));
        let agents: Vec<String> = text.lines().filter_map(|l| l.strip_prefix("agent: ")).map(String::from).collect();
        assert_eq!(agents.len(), n);
        Some(Testbed { id, token, agents, _one_at_a_time: lock })
    }

    fn ns(&self, i: usize) -> String {
        format!("nbtb{}a{}", self.id, i + 1)
    }

    /// Bytes received and sent by agent `i`'s interface.
    fn eth0(&self, i: usize) -> (u64, u64) {
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns(i)))
            .args(["cat", "/proc/net/dev"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text.lines().find(|l| l.trim_start().starts_with("eth0:")).expect("eth0 counters");
        let f: Vec<u64> = line.split(':').nth(1).unwrap().split_whitespace().map(|v| v.parse().unwrap()).collect();
        (f[0], f[8])
    }

    fn pid(&self, i: usize) -> i32 {
        let pids = std::fs::read_to_string(format!("/tmp/netblast-testbed-{}/pids", self.id)).unwrap();
        pids.lines().nth(i).unwrap().trim().parse().unwrap()
    }

    fn log(&self, i: usize) -> String {
        std::fs::read_to_string(format!("/tmp/netblast-testbed-{}/agent{}.log", self.id, i + 1)).unwrap_or_default()
    }

    fn fleet(&self) -> Command {
        fleet_cmd(&self.token)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["down", "--id", &self.id.to_string()]).status();
    }
}

fn result_of(out: &Output) -> RunResult {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
    })
}

/// Each agent's actual start, ns after the earliest.
fn starts(r: &RunResult) -> Vec<(String, u64)> {
    let min = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).min().unwrap_or(0);
    r.agents.iter().filter_map(|a| a.actual_start_unix_ns.map(|s| (a.agent.address.clone(), s - min))).collect()
}

fn skew_ns(r: &RunResult) -> u64 {
    let starts: Vec<u64> = r.agents.iter().filter_map(|a| a.actual_start_unix_ns).collect();
    starts.iter().max().unwrap() - starts.iter().min().unwrap()
}

/// Asserts that the client agents started together at the fleet's T0. An agent that started on
/// receiving its order instead of at T0 would be about the 2 s lead early; one that waited on a
/// clock of its own would be off by its clock's offset. On a quiet host the skew is 13-181 us;
/// the bound leaves room for the scheduler of a loaded 2-CPU host (5.2 ms seen while the rest
/// of the suite ran), and is still 40 times below the lead.
fn started_together(r: &RunResult) {
    const BOUND_NS: u64 = 50_000_000;
    let t0 = r.start_unix_ns.expect("a fleet result states its T0");
    for a in r.agents.iter().filter(|a| a.role == "client") {
        let s = a.actual_start_unix_ns.expect("a client agent reports its actual start");
        // Clock offsets on one host are known within microseconds: a millisecond early is wrong.
        assert!(
            s + 1_000_000 >= t0 && s <= t0 + BOUND_NS,
            "{} started {} ns after T0",
            a.agent.address,
            s as i128 - t0 as i128
        );
    }
    assert!(skew_ns(r) <= BOUND_NS, "start skew {} ns: {:?}", skew_ns(r), starts(r));
}

#[test]
fn bulk_fleet_merges_exactly_and_agrees_with_the_servers_interfaces() {
    let Some(tb) = Testbed::up("bulk_fleet_merges_exactly", 11, 4) else { return };
    let before: Vec<(u64, u64)> = (0..4).map(|i| tb.eth0(i)).collect();
    let frames = std::env::temp_dir().join(format!("nb-fleet-bulk-{}.jsonl", std::process::id()));
    let out = tb
        .fleet()
        .args(["--clients", &format!("{},{}", tb.agents[0], tb.agents[1])])
        .args(["--servers", &format!("{},{}", tb.agents[2], tb.agents[3])])
        .args(["-t", "2", "--flows", "2", "--json", "--frames"])
        .arg(&frames)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result_of(&out);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.parts.len(), 2);
    assert_eq!(r.agents.len(), 4);
    assert_eq!(r.agents.iter().filter(|a| a.role == "client").count(), 2);
    assert!(r.agents.iter().all(|a| a.status == "ok"), "{:?}", r.agents);
    // Merged bytes are the agents' own counts, added exactly.
    let parts_recv = util::merged_exactly("bulk fleet", &r);
    // The servers' interfaces saw those bytes plus the headers of the packets that carried them.
    let server_rx: u64 = (2..4).map(|i| tb.eth0(i).0 - before[i].0).sum();
    assert!(server_rx >= parts_recv, "interfaces {server_rx} < payload {parts_recv}");
    assert!(server_rx as f64 <= parts_recv as f64 * 1.08 + 4e6, "interfaces {server_rx} vs payload {parts_recv}");
    // The agents on one host started together.
    started_together(&r);
    // The log's replay states the skew the result states (found: 31.3 us in the result, 0 ns in
    // the replay), and no fleet-wide line of a few milliseconds.
    let skew_line = |t: &str| t.lines().find(|l| l.starts_with("Start skew")).map(str::to_string);
    let replay = util::bin().arg("report").arg(&frames).output().unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout).to_string();
    let own = netblast_report::text::summary(&r);
    assert!(skew_line(&own).is_some(), "{own}");
    // Each test's own verdict, from its own sender's kernel clocks and its client's settings.
    for (i, p) in r.parts.iter().enumerate() {
        assert!(p.summary.ways[0].limits.is_some() && p.client.is_some(), "part {i}: limits and client host kept");
        let d = netblast_report::limits::part(&r, p);
        assert_eq!(d.len(), 1, "part {i}: one way, one verdict");
        let line = format!("        verdict: {}", d[0].verdict);
        let at = own.lines().position(|l| l.starts_with(&format!("  [{i:>3}]"))).expect(&own);
        assert_eq!(own.lines().nth(at + 1), Some(line.as_str()), "{own}");
    }
    assert_eq!(skew_line(&replay), skew_line(&own), "{replay}");
    for l in replay.lines().filter(|l| l.starts_with("[FLEET]")) {
        let span: Vec<f64> = l[7..].split_whitespace().next().unwrap().split('-').map(|x| x.parse().unwrap()).collect();
        assert!(span[1] - span[0] >= 0.1, "{l}");
    }
    let _ = std::fs::remove_file(&frames);
}

#[test]
fn rr_and_http_fleets_add_their_histograms_exactly() {
    let Some(tb) = Testbed::up("rr_and_http_fleets", 12, 4) else { return };
    let count = |h: Option<&netblast_spec::hist::EncodedHistogram>| h.unwrap().decode().unwrap().len();
    let run = |extra: &[&str]| {
        let out = tb
            .fleet()
            .args(["--clients", &format!("{},{}", tb.agents[0], tb.agents[1])])
            .args(["--servers", &format!("{},{}", tb.agents[2], tb.agents[3])])
            .args(["-t", "2", "--json", "--compact"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{extra:?}: {}", String::from_utf8_lossy(&out.stderr));
        // --compact: the result on one line (the Kubernetes Job's log holds it whole).
        assert_eq!(out.stdout.iter().filter(|&&b| b == b'\n').count(), 1, "{extra:?}: one line");
        let r = result_of(&out);
        assert!(r.complete, "{:?}", r.errors);
        started_together(&r);
        r
    };
    // Blocking waits: spinning flows would take both CPUs of this host from the agents.
    let frames = std::env::temp_dir().join(format!("nb-fleet-rr-{}.jsonl", std::process::id()));
    let r =
        run(&["--profile", "latency", "--wait", "block", "--pairing", "mesh", "--frames", frames.to_str().unwrap()]);
    assert_eq!(r.parts.len(), 4, "a mesh: each client against each server");
    fleet_page(&r);
    // The fleet-wide line of a latency fleet counts transactions, not its few bits.
    let replay = util::bin().arg("report").arg(&frames).output().unwrap();
    let replay = String::from_utf8_lossy(&replay.stdout).to_string();
    let lines: Vec<&str> = replay.lines().filter(|l| l.starts_with("[FLEET]")).collect();
    assert!(!lines.is_empty() && lines.iter().all(|l| l.contains(" transactions (")), "{replay}");
    let _ = std::fs::remove_file(&frames);
    let merged = count(hist_of(&r.summary.ways[0].latency));
    let parts: u64 = r.parts.iter().map(|p| count(hist_of(&p.summary.ways[0].latency))).sum();
    assert!(merged > 100);
    assert_eq!(merged, parts, "every round trip of every agent, once");
    let per_interval: u64 = r.intervals.iter().map(|i| count(hist_of(&i.sums[0].latency))).sum();
    assert_eq!(per_interval, merged);

    let r = run(&["--profile", "http-max", "-c", "4"]);
    let h = r.summary.http.as_ref().unwrap();
    let parts: u64 = r.parts.iter().map(|p| p.summary.http.as_ref().unwrap().completed).sum();
    assert!(h.completed > 100);
    assert_eq!(h.completed, parts);
    assert_eq!(h.status_codes.get("200").copied(), Some(h.completed));
    assert_eq!(count(h.latency.hist.as_ref()), h.completed);
    // Each part names its client agent (the address it reached its server from) and the URL.
    let mut named: Vec<(String, String)> = r.parts.iter().map(|p| (p.agent.address.clone(), p.peer.clone())).collect();
    named.sort();
    let ip = |a: &str| a.rsplit_once(':').unwrap().0.to_string();
    assert_eq!(
        named,
        vec![
            (ip(&tb.agents[0]), format!("http://{}:8080/", ip(&tb.agents[2]))),
            (ip(&tb.agents[1]), format!("http://{}:8080/", ip(&tb.agents[3]))),
        ]
    );
}

#[test]
fn a_fleets_latency_probes_run_from_each_client_to_its_server() {
    let Some(tb) = Testbed::up("a_fleets_latency_probes", 18, 4) else { return };
    let out = tb
        .fleet()
        .args(["--clients", &format!("{},{}", tb.agents[0], tb.agents[1])])
        .args(["--servers", &format!("{},{}", tb.agents[2], tb.agents[3])])
        .args(["-t", "2", "--latency-probe", "20/s", "--idle", "1s", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result_of(&out);
    assert!(r.complete, "{:?}", r.errors);
    // T0 is the load's start: the probes' idle phase came before it, inside the lead.
    started_together(&r);
    let each: Vec<_> = r.parts.iter().map(|p| p.latency_probe.as_deref().expect("each test's probes")).collect();
    assert_eq!(each.len(), 2);
    for p in &each {
        let (idle, loaded) = (p.idle.as_ref().unwrap().count, p.loaded.as_ref().unwrap().count);
        assert!((15..=21).contains(&idle) && (30..=41).contains(&loaded), "{idle} idle, {loaded} loaded");
        assert!(p.intervals.is_empty(), "a part keeps its totals; the merged result its intervals");
    }
    let m = r.latency_probe.as_deref().expect("the fleet's probes, merged");
    let sum = |f: fn(&netblast_spec::result::LatencyProbeResult) -> u64| each.iter().map(|p| f(p)).sum::<u64>();
    assert_eq!(m.idle.as_ref().unwrap().count, sum(|p| p.idle.as_ref().unwrap().count));
    assert_eq!(m.loaded.as_ref().unwrap().count, sum(|p| p.loaded.as_ref().unwrap().count));
    assert_eq!(m.intervals.first().map(|i| i.start_s), Some(-1.0));
    let file = std::env::temp_dir().join(format!("nb-fleet-probe-{}.json", std::process::id()));
    std::fs::write(&file, &out.stdout).unwrap();
    let rep = util::bin().arg("report").arg(&file).output().unwrap();
    let _ = std::fs::remove_file(&file);
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.matches(", probe loaded p50 ").count() == 2 && text.contains("Latency probe (TCP at 20/s)"), "{text}");
}

/// A fleet's page in headless Chromium: the mesh as a client × server matrix of each test's
/// p50 / p99, a row per test, every server named in the header, the agents' clock offsets signed.
fn fleet_page(r: &RunResult) {
    use crate::browser::{browse, row_cells, table};
    use netblast_spec::units::fmt_ns;
    let dir = std::env::temp_dir().join(format!("nb-fleet-page-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (json, page) = (dir.join("fleet.json"), dir.join("fleet.html"));
    std::fs::write(&json, serde_json::to_string(r).unwrap()).unwrap();
    let o = util::bin().arg("report").arg(&json).arg("--html").arg(&page).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (dom, _) = browse(&page, &dir);
    let mesh = table(&dom, "mesh");
    for p in &r.parts {
        let l = p.summary.ways[0].latency.as_ref().unwrap();
        let cell = format!("{} / {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64));
        let cells = row_cells(mesh, &format!(">{} {}<", p.agent.hostname, p.agent.address));
        assert!(cells.contains(&cell), "mesh {} → {}: {cell} not in {cells:?}", p.agent.address, p.peer);
    }
    assert_eq!(table(&dom, "tests").matches("<tr").count(), 1 + r.parts.len());
    assert!(row_cells(table(&dom, "about"), ">target<")[0].starts_with("2 servers: "));
    let agents = table(&dom, "agents");
    for a in &r.agents {
        let cells = row_cells(agents, &format!(">{}<", a.agent.address));
        let offset = format!("{} ± {}", fmt_ns(a.clock.offset_ns as f64), fmt_ns(a.clock.error_ns as f64));
        assert!(cells.contains(&offset), "agent {}: {offset} (signed) not in {cells:?}", a.agent.address);
    }
    assert!(!dom.contains("merge-of-") && !dom.contains("OneToOne"), "ids and enum names are never shown raw");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A listed client agent that never connects: the fleet runs with the others, but its result
/// is incomplete (exit 3) and names the agent and why, in the JSON and the text.
#[test]
fn a_client_that_never_connected_makes_the_fleet_incomplete() {
    let Some(tb) = Testbed::up("a_client_that_never_connected", 16, 3) else { return };
    // An address of the testbed's subnet that no namespace holds.
    let nowhere = "10.77.16.99:5210".to_string();
    let out_file = std::env::temp_dir().join(format!("nb-fleet-unreachable-{}.json", std::process::id()));
    let out = tb
        .fleet()
        .args(["--clients", &format!("{},{nowhere}", tb.agents[0])])
        .args(["--servers", &format!("{},{}", tb.agents[1], tb.agents[2])])
        .args(["-t", "2", "--wait-agents", "5s", "-o"])
        .arg(&out_file)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    assert!(!r.complete);
    assert!(r.errors.iter().any(|e| e.source.contains(&nowhere)), "{:?}", r.errors);
    let failed = r.agents.iter().find(|a| a.agent.address == nowhere).expect("the unreachable agent is listed");
    assert_eq!((failed.role.as_str(), failed.status.as_str()), ("client", "failed"));
    assert!(failed.why.as_deref().is_some_and(|w| !w.is_empty()));
    // The text counts what merged and names the agent that took no part.
    assert!(text.contains("Merged 1 test from 1 client agent and 1 server agent"), "{text}");
    assert!(text.contains(&format!("client agent {nowhere}: failed")), "{text}");
    // Client i meets server i of the lists as given, whichever answered first.
    assert_eq!(r.parts[0].peer, tb.agents[1]);
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(netblast_report::json::PartialLog::path_for_suffix(&out_file, ".fleet.jsonl"));
}

#[test]
fn a_killed_agent_gives_a_partial_result_naming_it() {
    let Some(tb) = Testbed::up("a_killed_agent", 13, 4) else { return };
    let out_file = std::env::temp_dir().join(format!("nb-fleet-kill-{}.json", std::process::id()));
    let fleet = tb
        .fleet()
        .args(["--clients", &format!("{},{}", tb.agents[0], tb.agents[1])])
        .args(["--servers", &format!("{},{}", tb.agents[2], tb.agents[3])])
        .args(["-t", "6", "-i", "500ms", "-o"])
        .arg(&out_file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Two seconds into the test (after the lead), agent 0 (a client) dies.
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill has no memory-safety preconditions; the pid is the testbed's agent.
    unsafe { libc::kill(tb.pid(0), libc::SIGKILL) };
    let out = util::wait_output(fleet, Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    assert!(!r.complete);
    let dead = r.agents.iter().find(|a| a.agent.address == tb.agents[0]).unwrap();
    assert_eq!(dead.status, "failed");
    // Stated at the instant it happened (about 2 s into the test), not at 0.
    let e = r.errors.iter().find(|e| e.source.contains(&tb.agents[0])).unwrap_or_else(|| panic!("{:?}", r.errors));
    assert!(e.at_s > 0.5 && e.at_s < 6.0, "{e:?}");
    // The other client's test is whole.
    assert_eq!(r.parts.len(), 1);
    let p = &r.parts[0];
    assert!(p.complete);
    let w = &p.summary.ways[0];
    assert_eq!(Some(w.sender.bytes), w.receiver.map(|x| x.bytes));
    assert!(p.summary.duration_s >= 5.9, "it ran to its bound: {}", p.summary.duration_s);
    // Every frame the coordinator received is in its log, and the report renders the log.
    let log = netblast_report::json::PartialLog::path_for_suffix(&out_file, ".fleet.jsonl");
    let rep = util::bin().arg("report").arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert!(text.contains("fleet log") && text.contains(&tb.agents[0]), "{text}");
    let _ = std::fs::remove_file(out_file);
    let _ = std::fs::remove_file(log);
}

#[test]
fn wrong_tokens_and_targets_outside_the_allowlist_are_refused_with_no_traffic() {
    let Some(tb) = Testbed::up("wrong_tokens_and_targets", 14, 2) else { return };
    let before: Vec<(u64, u64)> = (0..2).map(|i| tb.eth0(i)).collect();
    let wrong = util::token_file("fleet-wrong", "not-the-testbed-token-at-all");
    let out = fleet_cmd(&wrong)
        .args(["--clients", &tb.agents[0], "--servers", &tb.agents[1], "-t", "2", "--wait-agents", "5s"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("no client agent is ready") && err.contains("authentication"), "{err}");
    for (i, (rx0, tx0)) in before.iter().enumerate() {
        let (rx, tx) = tb.eth0(i);
        assert!(rx - rx0 < 16 * 1024 && tx - tx0 < 16 * 1024, "agent {i} moved traffic");
        // The coordinator gives up when the client is refused; the server's refusal may be
        // logged a moment later.
        let logged = (0..50).any(|_| {
            let found = tb.log(i).contains("refused connection");
            if !found {
                std::thread::sleep(Duration::from_millis(100));
            }
            found
        });
        assert!(logged, "the refusal is logged: {}", tb.log(i));
    }
    // A server the client agent may not reach: a netblast serve on the host's loopback.
    let (server, addr) = util::spawn_server_with(&["--probe", "tcpinfo", "--token-file", tb.token.to_str().unwrap()]);
    let _server = KillOnDrop(server);
    let before = tb.eth0(0);
    let out =
        tb.fleet().args(["--clients", &tb.agents[0], "--servers", &addr.to_string(), "-t", "2"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("outside this agent's allowlist"), "{err}");
    assert!(tb.log(0).contains("refused fleet order"), "{}", tb.log(0));
    assert!(tb.eth0(0).1 - before.1 < 16 * 1024, "no test traffic left the agent");
    let _ = std::fs::remove_file(wrong);
}

/// Agents that dial the coordinator (`serve --register`), on loopback: no namespaces needed.
#[test]
fn registered_agents_take_part_by_group() {
    let _one = one_fleet();
    let token = util::token_file("register", "a-token-for-registered-agents");
    let coord = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = coord.local_addr().unwrap().port();
    drop(coord);
    let agent = |group: &str| {
        KillOnDrop(
            util::bin()
                .args(["serve", "--bind", "127.0.0.1", "--port", "0", "--probe", "tcpinfo", "--token-file"])
                .arg(&token)
                .args(["--register", &format!("127.0.0.1:{port}"), "--group", group])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        )
    };
    let _agents = [agent("c"), agent("c"), agent("s"), agent("spare")];
    let out = fleet_cmd(&token)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--clients", "registered:c:2", "--servers", "registered:s:1", "--wait-agents", "30s"])
        .args(["-t", "1", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result_of(&out);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.parts.len(), 2, "two clients, each against the one server");
    assert_eq!(r.agents.len(), 3, "the spare group was sent away");
    let _ = std::fs::remove_file(token);
}

/// `netblast fleet --token-file TOKEN`, run in the temporary directory (a fleet with neither
/// `-o` nor `--frames` logs its agents' frames to the working directory).
pub(crate) fn fleet_cmd(token: &std::path::Path) -> Command {
    let mut c = util::bin();
    c.current_dir(std::env::temp_dir());
    c.args(["fleet", "--token-file"]).arg(token);
    c
}

/// Two token agents on loopback: (client address, server address, their processes).
fn loopback_pair(token: &std::path::Path) -> (String, String, [KillOnDrop; 2]) {
    let spawn = || {
        let (child, addr) = util::spawn_server_with(&["--probe", "tcpinfo", "--token-file", token.to_str().unwrap()]);
        (KillOnDrop(child), addr.to_string())
    };
    let ((c, ca), (s, sa)) = (spawn(), spawn());
    (ca, sa, [c, s])
}

/// Established TCP connections to or from `port` on this host.
fn established(port: u16) -> usize {
    let out = Command::new("ss").args(["-Htn", "state", "established"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| l.contains(&format!(":{port} "))).count()
}

#[test]
fn ctrl_c_cancels_every_test_and_keeps_what_was_measured() {
    let _one = one_fleet();
    let token = util::token_file("ctrl-c", "a-token-for-the-ctrl-c-test");
    let (client, server, _agents) = loopback_pair(&token);
    let out_file = std::env::temp_dir().join(format!("nb-fleet-int-{}.json", std::process::id()));
    let fleet = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "-t", "60", "-o"])
        .arg(&out_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(4));
    // SAFETY: kill has no memory-safety preconditions; the pid is our child's.
    unsafe { libc::kill(fleet.id() as i32, libc::SIGINT) };
    let out = util::wait_output(fleet, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(3));
    let r: RunResult = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    assert!(!r.complete && r.errors.iter().any(|e| e.message.contains("interrupted")), "{:?}", r.errors);
    assert_eq!(r.parts.len(), 1, "what the agent measured is kept");
    let w = &r.parts[0].summary.ways[0];
    assert!(w.sender.bytes > 0 && w.sender.seconds < 10.0, "stopped early: {:?}", w.sender);
    let port: u16 = server.rsplit(':').next().unwrap().parse().unwrap();
    assert_eq!(established(port), 0, "no test connection is left");
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(netblast_report::json::PartialLog::path_for_suffix(&out_file, ".fleet.jsonl"));
    let _ = std::fs::remove_file(token);
}

#[test]
fn a_dead_coordinator_leaves_no_traffic_running() {
    let _one = one_fleet();
    let token = util::token_file("dead-coord", "a-token-for-the-dead-coordinator");
    let (client, server, _agents) = loopback_pair(&token);
    let log = std::env::temp_dir().join(format!("nb-fleet-dead-{}.jsonl", std::process::id()));
    let mut fleet = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "-t", "60", "--frames"])
        .arg(&log)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port: u16 = server.rsplit(':').next().unwrap().parse().unwrap();
    let t = std::time::Instant::now();
    while established(port) < 2 && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(established(port) >= 2, "the test is running");
    let mut chance = util::Chance::seeded();
    let at = chance.millis(0, 3000);
    std::thread::sleep(at);
    fleet.kill().unwrap();
    let _ = fleet.wait();
    // The client agent stops its test (the server's end follows): well before the 60 s bound.
    let t = std::time::Instant::now();
    while established(port) > 0 && t.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(established(port), 0, "traffic still runs {:?} after the coordinator died", t.elapsed());
    // What it received is in its log; cut at a random byte (a kill while writing), the report
    // reads it as an incomplete fleet run.
    let whole = std::fs::read_to_string(&log).unwrap();
    let len = util::cut_after_first_line(&log, &mut chance);
    let what = format!("killed {at:?} into the test, log cut at byte {len} of {} (seed {})", whole.len(), chance.seed);
    let rep = util::bin().arg("report").arg(&log).output().unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert_eq!(rep.status.code(), Some(1), "{what}: {text}{}", String::from_utf8_lossy(&rep.stderr));
    assert!(
        text.contains("fleet log: 2 agents, 1 tests") && text.contains("INCOMPLETE: 0 of 1 tests"),
        "{what}: {text}"
    );
    let cut_mid_record = util::cut_mid_record(whole.as_bytes(), len as usize);
    assert_eq!(text.contains("last line was cut"), cut_mid_record, "{what}: {text}");
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(token);
}

/// Two token agents bound to 127.0.0.2 and 127.0.0.3 on one port (as two hosts would be).
fn bound_pair(token: &std::path::Path) -> (u16, [KillOnDrop; 2]) {
    let port = std::net::TcpListener::bind("127.0.0.2:0").unwrap().local_addr().unwrap().port();
    let agent = |ip: &str| {
        let mut c = util::bin();
        c.args(["serve", "--bind", ip, "--port", &port.to_string(), "--probe", "tcpinfo", "--token-file"]).arg(token);
        let (child, addr) = util::spawn_server_from(c);
        assert_eq!(addr.to_string(), format!("{ip}:{port}"));
        KillOnDrop(child)
    };
    (port, [agent("127.0.0.2"), agent("127.0.0.3")])
}

#[test]
fn an_agent_bound_to_one_address_is_reached_at_it() {
    // Its hello names only that address: clients used to be sent to the host's first other
    // interface address, where nothing listened.
    let _one = one_fleet();
    let token = util::token_file("bound", "a-token-for-bound-agents");
    let (port, _agents) = bound_pair(&token);
    let out = fleet_cmd(&token)
        .args(["--clients", &format!("127.0.0.2:{port}"), "--servers", &format!("127.0.0.3:{port}")])
        .args(["-t", "1", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result_of(&out);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.parts[0].peer, format!("127.0.0.3:{port}"));
    let _ = std::fs::remove_file(token);
}

/// `--clients azure:vmss=…` (a Flexible scale set, what `az vmss create` makes today) and
/// `--servers azure:rg=…,tag=…`: agents found through a fake Resource Manager on loopback (their
/// "private addresses" are 127.0.0.2 and 127.0.0.3), then driven like any others.
#[cfg(feature = "azure")]
#[test]
fn agents_found_in_azure_take_part() {
    use netblast_azure::fake_arm::{FakeArm, Reply, flexible_set, nic};
    let _one = one_fleet();
    let token = util::token_file("azure", "a-token-for-azure-agents");
    let (port, _agents) = bound_pair(&token);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let sub = "/subscriptions/sub1/resourceGroups/perf/providers";
    let mut routes = flexible_set("sub1", "perf", "clients", &["127.0.0.2"], &[], 10);
    // The resource group's interfaces: the client VM's (from flexible_set) and the server's,
    // tagged; one listing answers both lists.
    let group_nics =
        routes.iter_mut().find(|(p, _)| p == &format!("{sub}/Microsoft.Network/networkInterfaces")).unwrap();
    let mut listing: serde_json::Value = serde_json::from_str(&group_nics.1[0].body).unwrap();
    listing["value"].as_array_mut().unwrap().push(nic("s0", "127.0.0.3", true, &[("role", "server")]));
    group_nics.1[0].body = listing.to_string();
    let arm = rt.block_on(FakeArm::start(routes)).unwrap();
    let out = fleet_cmd(&token)
        .args(["--clients", &format!("azure:vmss=clients,rg=perf,subscription=sub1,port={port}")])
        .args(["--servers", &format!("azure:rg=perf,tag=role=server,subscription=sub1,port={port}")])
        .args(["-t", "1", "--json"])
        .env("NETBLAST_ARM_ENDPOINT", arm.endpoint())
        .env("NETBLAST_ARM_TOKEN", "arm-token")
        .env_remove("AZURE_SUBSCRIPTION_ID")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let r = result_of(&out);
    assert!(r.complete, "{:?}", r.errors);
    assert_eq!(r.agents.len(), 2);
    assert!(r.summary.ways[0].receiver.as_ref().is_some_and(|t| t.bytes > 0), "{:?}", r.summary.ways);
    // The set, its VMs, the group's interfaces (clients); the group's interfaces (servers).
    assert_eq!(arm.seen().len(), 4, "{:?}", arm.seen());
    // A list Resource Manager refuses: bad input naming the list and the credential.
    drop(arm);
    let arm = rt
        .block_on(FakeArm::start(vec![(
            format!("{sub}/Microsoft.Compute/virtualMachineScaleSets/clients"),
            vec![Reply::error(403, "AuthorizationFailed", "no")],
        )]))
        .unwrap();
    let out = fleet_cmd(&token)
        .args(["--clients", "azure:vmss=clients,rg=perf,subscription=sub1", "-t", "1"])
        .env("NETBLAST_ARM_ENDPOINT", arm.endpoint())
        .env("NETBLAST_ARM_TOKEN", "arm-token")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("--clients") && err.contains("403") && err.contains("NETBLAST_ARM_TOKEN"), "{err}");
    let _ = std::fs::remove_file(token);
}

#[test]
fn fleet_metrics_show_the_live_fleet_and_stay_within_its_result() {
    let _one = one_fleet();
    let token = util::token_file("metrics", "a-token-for-the-fleet-metrics-test");
    let (client, server, _agents) = loopback_pair(&token);
    let out_file = std::env::temp_dir().join(format!("nb-fleet-metrics-{}.json", std::process::id()));
    let mut fleet = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "--profile", "latency", "--wait", "block"])
        .args(["-t", "4", "-i", "500ms", "--metrics", "127.0.0.1:0", "--metrics-linger", "20s", "-o"])
        .arg(&out_file)
        .args(["--latency-probe", "10/s", "--idle", "500ms"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = fleet.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)).map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let wait_for = |what: &str| loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_else(|_| panic!("no line with {what}"));
        if line.contains(what) {
            return line;
        }
    };
    let line = wait_for("metrics on http://");
    let at: std::net::SocketAddr =
        line.split("http://").nth(1).unwrap().trim_end_matches("/metrics").parse().expect("the metrics address");
    wait_for("[FLEET]");
    wait_for("[FLEET]");
    let s = util::scrape(at);
    let v = |name: &str, labels: &[(&str, &str)]| util::value(&s, name, labels).unwrap_or(-1.0);
    assert_eq!(v("netblast_fleet_agents", &[("role", "client"), ("state", "ready")]), 1.0);
    assert_eq!(v("netblast_fleet_agents", &[("role", "server"), ("state", "ready")]), 1.0);
    assert_eq!((v("netblast_fleet_tests_running", &[]), v("netblast_fleet_tests_reporting", &[])), (1.0, 1.0));
    assert!(v("netblast_fleet_intervals_total", &[]) >= 2.0);
    assert!(v("netblast_fleet_bytes_per_second", &[]) > 0.0 && v("netblast_fleet_bytes_total", &[]) > 0.0);
    util::promtool_passes(at);
    let live = util::histogram_count(&s, "netblast_fleet_latency_seconds");
    assert!(live > 0.0, "round trips counted live");
    // The result is written first; the endpoint then lingers with the final counts.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let r: RunResult = loop {
        if let Ok(b) = std::fs::read(&out_file) {
            break serde_json::from_slice(&b).unwrap();
        }
        assert!(std::time::Instant::now() < deadline, "no result file");
        std::thread::sleep(Duration::from_millis(100));
    };
    let total = r.summary.ways[0].latency.as_ref().unwrap().count as f64;
    assert!(live < total, "mid-run {live} below the final {total}");
    let after = util::scrape(at);
    assert_eq!(util::histogram_count(&after, "netblast_fleet_latency_seconds"), total, "the final count, held");
    assert_eq!(util::value(&after, "netblast_fleet_tests_running", &[]), Some(0.0));
    assert_eq!(util::value(&after, "netblast_fleet_bytes_per_second", &[]), Some(0.0));
    // Each finished test's latency probes, idle and loaded, counted once it is in.
    let probes = r.latency_probe.as_deref().expect("the fleet's probes");
    for (name, d) in [("idle", &probes.idle), ("loaded", &probes.loaded)] {
        let count = d.as_ref().map_or(0, |d| d.count) as f64;
        assert!(count > 0.0, "{name}");
        assert_eq!(util::histogram_count(&after, &format!("netblast_fleet_probe_{name}_rtt_seconds")), count);
    }
    let added = util::value(&after, "netblast_fleet_probe_added_p50_seconds", &[]).unwrap();
    assert_eq!(added, probes.added_p50_ns.unwrap() as f64 / 1e9, "one test: its added latency");
    assert!(fleet.try_wait().unwrap().is_none(), "still serving the final counts");
    // Ctrl-C ends the linger early, with the run's status.
    // SAFETY: kill on a child this test spawned.
    unsafe { libc::kill(fleet.id() as i32, libc::SIGINT) };
    let out = util::wait_output(fleet, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(0));
    let _ = std::fs::remove_file(&out_file);
    let _ = std::fs::remove_file(netblast_report::json::PartialLog::path_for_suffix(&out_file, ".fleet.jsonl"));
    let _ = std::fs::remove_file(token);
}

/// Prometheus's answer to an instant query of `expr`, if it has a sample.
fn prometheus_value(at: std::net::SocketAddr, expr: &str) -> Option<f64> {
    let mut c = std::net::TcpStream::connect(at).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    let ask = format!("GET /api/v1/query?query={expr} HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n\r\n");
    std::io::Write::write_all(&mut c, ask.as_bytes()).ok()?;
    let mut text = String::new();
    std::io::Read::read_to_string(&mut c, &mut text).ok()?;
    let body: serde_json::Value = serde_json::from_str(text.split_once("\r\n\r\n")?.1).ok()?;
    body["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn prometheus_scraping_every_15s_holds_the_fleets_final_count() {
    if Command::new("prometheus").arg("--version").output().is_err() {
        crate::util::skipped(
            "prometheus_scraping_every_15s_holds_the_fleets_final_count",
            "Prometheus is not installed (Debian: prometheus; scripts/setup.sh)",
        );
        return;
    }
    let _one = one_fleet();
    let token = util::token_file("prom", "a-token-for-the-prometheus-test");
    let (client, server, _agents) = loopback_pair(&token);
    let free = || std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let (metrics, web) = (free(), free());
    let dir = std::env::temp_dir().join(format!("nb-prom-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 15s\nscrape_configs:\n  - job_name: fleet\n    static_configs:\n      \
             - targets: ['{metrics}']\n"
        ),
    )
    .unwrap();
    let _prom = KillOnDrop(
        Command::new("prometheus")
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
            .arg(format!("--web.listen-address={web}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let out_file = dir.join("fleet.json");
    // The default linger (30 s) is two scrapes at 15 s; one is enough to hold the final count.
    let fleet = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "--profile", "latency", "-t", "3"])
        .args(["--metrics", &metrics.to_string(), "--metrics-linger", "17s", "-o"])
        .arg(&out_file)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = util::wait_output(fleet, Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(0));
    let r: RunResult = serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
    let total = r.summary.ways[0].latency.as_ref().unwrap().count as f64;
    let scraped = prometheus_value(web, "netblast_fleet_latency_seconds_count");
    assert_eq!(scraped, Some(total), "Prometheus's last scrape of the fleet against its result");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(token);
}

#[test]
fn a_fleet_on_a_terminal_gets_a_status_line_with_tests_reporting() {
    let _one = one_fleet();
    let token = util::token_file("fleet-tty", "a-token-for-the-fleet-status-test");
    let (client, server, _agents) = loopback_pair(&token);
    let frames = std::env::temp_dir().join(format!("nb-fleet-tty-{}.jsonl", std::process::id()));
    let cmd = format!(
        "{} fleet --token-file {} --clients {client} --servers {server} -t 2 --frames {}",
        env!("CARGO_BIN_EXE_netblast"),
        token.display(),
        frames.display()
    );
    let o = Command::new("script").args(["-qec", &cmd, "/dev/null"]).output().unwrap();
    let tty = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{tty}");
    assert!(tty.contains(" of 2 s [") && tty.contains("\r\u{1b}[2K"), "no status line on a terminal: {tty}");
    assert!(tty.contains("1/1 tests reporting, 0 agent(s) failed"), "{tty}");
    assert!(tty.contains("[FLEET]"), "interval lines still print above it: {tty}");
    // --quiet: no agent, interval or status lines.
    let o = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "-t", "1", "-q", "--frames"])
        .arg(&frames)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("[FLEET]") && !out.contains("ready"), "{out}");
    let _ = std::fs::remove_file(&frames);
    let _ = std::fs::remove_file(token);
}

#[test]
fn a_quiet_json_fleet_writes_its_result_and_nothing_else() {
    // As the Kubernetes Job runs it: `kubectl logs` mixes stderr into stdout, and a note there
    // made the log unreadable ("expected ident at line 1 column 2").
    let _one = one_fleet();
    let token = util::token_file("quiet", "a-token-for-the-quiet-fleet");
    let (client, server, _agents) = loopback_pair(&token);
    let frames = std::env::temp_dir().join(format!("nb-fleet-quiet-{}.jsonl", std::process::id()));
    let out = fleet_cmd(&token)
        .args(["--clients", &client, "--servers", &server, "-t", "1", "--json", "--quiet", "--frames"])
        .arg(&frames)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    let log = std::env::temp_dir().join(format!("nb-fleet-quiet-{}.json", std::process::id()));
    std::fs::write(&log, &out.stdout).unwrap();
    let rep = util::bin().arg("report").arg(&log).output().unwrap();
    assert!(rep.status.success(), "report reads the log: {}", String::from_utf8_lossy(&rep.stderr));
    let _ = std::fs::remove_file(log);
    let _ = std::fs::remove_file(frames);
    let _ = std::fs::remove_file(token);
}

#[test]
fn an_agent_that_starts_after_the_coordinator_is_waited_for() {
    // A Job started beside its agents: the address answers "refused" until the agent listens,
    // and the coordinator dials again until --wait-agents runs out.
    let _one = one_fleet();
    let token = util::token_file("fleet-late", "a token for the agent that starts late");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (server, server_addr) =
        util::spawn_server_with(&["--probe", "tcpinfo", "--token-file", token.to_str().unwrap()]);
    let _server = KillOnDrop(server);
    let coordinator = fleet_cmd(&token)
        .args(["--clients", &format!("127.0.0.1:{port}"), "--servers", &server_addr.to_string()])
        .args(["-t", "1", "--wait-agents", "20s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut late = util::bin();
    late.args(["serve", "--probe", "tcpinfo", "--port", &port.to_string(), "--token-file"]).arg(&token);
    let _late = KillOnDrop(late.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap());
    let out = util::wait_output(coordinator, Duration::from_secs(60));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("trying again until --wait-agents runs out"), "the wait is said: {err}");
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r.complete && r.parts.len() == 1, "{:?}", r.errors);
}
