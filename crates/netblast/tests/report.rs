//! `netblast report --html` (issues 11 and 25): a page per kind of real loopback runs (bulk,
//! UDP, TCP messages, rr, cps, HTTP closed and open loop, an HTTP sweep, a merge of tests
//! against several servers as a client × server matrix) and three runs compared, each rendered
//! by headless Chromium and held to the figures of its JSON, by name and value. (A fleet's
//! page is judged in the fleet tests.)

use crate::browser::{browse, figure, ink, marks, row_cells, table};
use crate::http::Responder;
use crate::util::{self, KillOnDrop};
use netblast_spec::RunResult;
use netblast_spec::units::{fmt_bits_per_s, fmt_ns, fmt_per_s};
use std::path::Path;
use std::process::Command;

fn report(args: &[&str]) -> String {
    let o = util::bin().arg("report").args(args).output().unwrap();
    assert!(o.status.success(), "report {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn read(p: &Path) -> RunResult {
    netblast_spec::upgrade::read_result(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// The value cells of the headline figures table's row for `metric`, and its label.
fn headline_row(dom: &str, metric: &str) -> Vec<String> {
    row_cells(table(dom, "figures"), &format!("data-metric=\"{metric}\""))
}

/// Renders `json`'s page, checks it is self-contained, not blank, and draws `charts`; its DOM.
fn page_of(dir: &Path, json: &Path, charts: &[&str]) -> String {
    let page = dir.join(json.file_name().unwrap()).with_extension("html");
    let text = report(&[json.to_str().unwrap(), "--html", page.to_str().unwrap()]);
    assert!(text.is_empty(), "--html prints no text report beside the page: {text}");
    check_page(dir, &page, charts)
}

fn check_page(dir: &Path, page: &Path, charts: &[&str]) -> String {
    let html = std::fs::read_to_string(page).unwrap();
    for outside in ["<link", "@import", "src=", "href=", "url("] {
        assert!(!html.contains(outside), "{}: not self-contained: {outside}", page.display());
    }
    let (dom, shot) = browse(page, dir);
    for id in charts {
        assert!(marks(&dom, &format!("chart-{id}")) >= 2, "{}: chart {id} draws nothing", page.display());
    }
    let (rows, colour) = ink(&shot);
    let want = 300 * charts.len();
    assert!(rows > want && colour > 2000, "{}: {rows} rows inked (want > {want}), {colour} coloured", page.display());
    dom
}

/// The headline row of `metric` says `label` and shows `value`.
fn says(dom: &str, metric: &str, label: &str, value: &str) {
    let cells = headline_row(dom, metric);
    assert!(cells[0].starts_with(label), "{metric}: labelled {:?}, want {label:?}", cells[0]);
    assert_eq!(cells[1], value, "{metric} ({label})");
}

#[test]
fn a_page_per_kind_holds_its_own_figures_in_headless_chromium() {
    let dir = std::env::temp_dir().join(format!("netblast-html-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (server, addr) = util::spawn_server();
    let _server = KillOnDrop(server);
    let (server2, addr2) = util::spawn_server();
    let _server2 = KillOnDrop(server2);
    let web = Responder::start(false);
    let (target, target2) = (addr.to_string(), addr2.to_string());
    let url = format!("http://{}/", web.addr);
    let path = |n: &str| dir.join(n);
    let runs: Vec<(&str, Vec<&str>)> = vec![
        ("bulk.json", vec!["--target", &target, "--flows", "2", "-t", "2", "-i", "500ms", "-C", "reno"]),
        ("udp.json", vec!["--target", &target, "--profile", "udp-1g", "-b", "100M", "-t", "2", "-i", "500ms"]),
        ("bulk-w.json", vec!["--target", &target, "-w", "64KiB", "-t", "1", "-i", "500ms"]),
        ("pps.json", vec!["--target", &target, "--profile", "pps-8core", "-t", "1", "-i", "500ms"]),
        ("rr-off.json", vec!["--target", &target, "--profile", "latency", "--label", "off", "-t", "1", "-i", "250ms"]),
        ("rr-alert.json", vec!["--target", &target, "--profile", "latency", "-t", "1", "-i", "250ms"]),
        ("rr-deny.json", vec!["--target", &target, "--profile", "latency", "-t", "1", "-i", "250ms"]),
        ("cps.json", vec!["--target", &target, "--profile", "cps", "-t", "1", "-i", "250ms"]),
        ("hold.json", vec!["--target", &target, "--profile", "hold", "--conns", "200", "-t", "1", "-i", "250ms"]),
        ("http.json", vec!["--url", &url, "--profile", "http-max", "-c", "4", "-t", "1", "-i", "250ms"]),
        ("http-open.json", vec!["--url", &url, "--profile", "http-max", "-c", "4", "--rate", "2000", "-t", "2"]),
        ("sweep.json", vec!["--url", &url, "--profile", "http-sweep", "-c", "50", "-t", "500ms", "-i", "250ms"]),
        // Two clients (source addresses) against two servers, at one instant: a mesh.
        ("m-a1.json", vec!["--target", &target, "--profile", "latency", "-B", "127.0.0.2", "-t", "1"]),
        ("m-a2.json", vec!["--target", &target2, "--profile", "latency", "-B", "127.0.0.2", "-t", "1"]),
        ("m-b1.json", vec!["--target", &target, "--profile", "latency", "-B", "127.0.0.3", "-t", "1"]),
        ("m-b2.json", vec!["--target", &target2, "--profile", "latency", "-B", "127.0.0.3", "-t", "1"]),
    ];
    for (out, args) in runs.iter().filter(|(o, _)| !o.starts_with("m-")) {
        // Blocking waits: a spinning round trip would take both CPUs of this host.
        let wait: &[&str] = if args.contains(&"latency") { &["--wait", "block"] } else { &[] };
        let o = util::run_cmd().args(args).args(wait).args(["-q", "-o"]).arg(path(out)).output().unwrap();
        assert!(o.status.success(), "run {args:?}: {}", String::from_utf8_lossy(&o.stderr));
    }
    // The mesh's four tests start at one instant.
    // An absolute instant (Unix seconds) 2-3 s away: the same for the four.
    let at = (std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + 3).to_string();
    let children: Vec<_> = runs
        .iter()
        .filter(|(o, _)| o.starts_with("m-"))
        .map(|(out, args)| {
            util::run_cmd()
                .args(args)
                .args(["-q", "--wait", "block", "--start-at", &at, "-o"])
                .arg(path(out))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "mesh run: {}", String::from_utf8_lossy(&o.stderr));
    }

    // bulk: throughput received, per stream; the kernel's cwnd and srtt per stream; fairness.
    let r = read(&path("bulk.json"));
    let dom = page_of(&dir, &path("bulk.json"), &["throughput", "cwnd", "srtt"]);
    let bps: f64 = r.summary.ways.iter().map(|w| w.receiver.unwrap().bits_per_s).sum();
    says(&dom, "throughput", "throughput (received)", &fmt_bits_per_s(bps));
    let legend = figure(&dom, "chart-throughput");
    assert!(legend.contains("total received") && legend.contains("stream 0") && legend.contains("stream 1"));
    let streams = table(&dom, "streams");
    for s in &r.summary.streams {
        let cells = row_cells(streams, &format!("<td>{}</td><td class=\"l\">client → server", s.id));
        assert!(cells.contains(&fmt_bits_per_s(s.receiver.unwrap().bits_per_s)), "stream {}: {cells:?}", s.id);
    }
    assert!(dom.contains("Jain's index"), "bulk: no fairness across flows");
    assert!(row_cells(table(&dom, "cpu"), "client")[0].contains("CPUs (user"), "bulk: client CPU");
    assert_eq!(row_cells(table(&dom, "about"), ">congestion control<")[0], "reno", "bulk: -C names it");

    // UDP: datagrams per second, loss and jitter, over time too.
    let r = read(&path("udp.json"));
    let dom = page_of(&dir, &path("udp.json"), &["throughput", "ops", "loss", "jitter"]);
    let m = r.summary.ways[0].msgs.as_ref().unwrap();
    let q = m.udp.and_then(|u| u.quality).unwrap();
    says(&dom, "lost", "datagrams lost", &m.lost.unwrap().to_string());
    says(&dom, "jitter", "jitter (RFC 3550)", &fmt_ns(q.jitter_ns));
    says(&dom, "msgs", "datagrams per second", &fmt_per_s(m.received_per_s.unwrap()));
    assert!(!dom.contains("chart-retransmits"), "UDP has no retransmits chart");
    assert_eq!(row_cells(table(&dom, "about"), ">congestion control<")[0], "—", "UDP has none");

    // TCP messages: messages per second, and the segments on the wire beside them.
    let r = read(&path("pps.json"));
    let dom = page_of(&dir, &path("pps.json"), &["ops"]);
    let rate: f64 =
        r.summary.ways.iter().map(|w| w.msgs.as_ref().unwrap()).map(|m| m.received_per_s.unwrap_or(m.sent_per_s)).sum();
    says(&dom, "msgs", "messages per second", &fmt_per_s(rate));
    assert!(figure(&dom, "chart-ops").contains("TCP segments sent (packets, not messages)"));
    assert!(!dom.contains("id=\"chart-throughput\""), "TCP messages headline no bit rate");

    // rr: transactions per second, round-trip percentiles, p99 over time.
    let r = read(&path("rr-off.json"));
    let dom = page_of(&dir, &path("rr-off.json"), &["ops", "latency-time", "latency"]);
    let l = r.summary.ways[0].latency.as_ref().unwrap();
    says(&dom, "p99", "round-trip latency p99", &fmt_ns(l.p99_ns as f64));
    // `msgs` is what the receiving end counted (docs/metrics.md): the requests the server answered.
    let m = r.summary.ways[0].msgs.as_ref().unwrap();
    says(&dom, "msgs", "transactions per second", &fmt_per_s(m.received_per_s.unwrap_or(m.sent_per_s)));
    let over_time = figure(&dom, "chart-latency-time");
    assert!(
        over_time.contains("Round-trip latency per interval") && over_time.contains(">p99<"),
        "rr: no p99 over time"
    );
    for iv in r.intervals.iter().filter(|iv| iv.sums[0].latency.as_ref().is_some_and(|l| l.count > 0)) {
        // Each interval's value is its hover text.
        let p99 = fmt_ns(iv.sums[0].latency.as_ref().unwrap().p99_ns as f64);
        assert!(
            over_time.contains(&format!(" s: {p99}</title>")),
            "rr: interval {} p99 {p99} not on the chart",
            iv.index
        );
    }

    // cps: connections per second and failures by cause.
    let r = read(&path("cps.json"));
    let dom = page_of(&dir, &path("cps.json"), &["ops", "latency-time"]);
    let m = r.summary.ways[0].msgs.as_ref().unwrap();
    says(&dom, "msgs", "connections per second", &fmt_per_s(m.received_per_s.unwrap_or(m.sent_per_s)));
    assert_eq!(row_cells(table(&dom, "connections"), ">established<")[0], m.sent.to_string());
    // Without -C: the client host's default, as the result recorded it.
    let cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap();
    assert_eq!(row_cells(table(&dom, "about"), ">congestion control<")[0], cc.trim());
    assert!(!dom.contains("throughput (received)"), "cps headlines no bit rate");

    // hold: the connections held over time, its latency's samples named as what they are.
    let r = read(&path("hold.json"));
    let dom = page_of(&dir, &path("hold.json"), &["held", "latency"]);
    assert_eq!(r.held(), Some(200));
    assert!(figure(&dom, "chart-held").contains("held (answered the probe)"), "hold: no held chart");
    assert!(figure(&dom, "chart-latency").contains("connections opened ("), "hold: latency samples misnamed");

    // HTTP closed loop: responses per second, status codes, phases.
    let r = read(&path("http.json"));
    let dom = page_of(&dir, &path("http.json"), &["http-rate", "latency-time", "latency"]);
    let h = r.summary.http.as_ref().unwrap();
    says(&dom, "rps", "responses per second", &fmt_per_s(h.responses_per_s));
    assert_eq!(row_cells(table(&dom, "status"), ">200<")[1], h.completed.to_string());
    assert!(table(&dom, "phases").contains("time to first byte"));
    let about = table(&dom, "about");
    assert!(row_cells(about, ">target<")[0].contains(&url), "http: the target is its URL: {about}");
    assert_eq!(row_cells(about, ">streams<")[0], "4 connections");

    // HTTP open loop: the target rate beside what was achieved, the send lag.
    let r = read(&path("http-open.json"));
    let dom = page_of(&dir, &path("http-open.json"), &["http-rate"]);
    let h = r.summary.http.as_ref().unwrap();
    assert_eq!(row_cells(table(&dom, "http"), ">target rate<")[0], fmt_per_s(h.target_rate.unwrap()));
    assert!(figure(&dom, "chart-http-rate").contains("target (offered rate)"));
    assert!(table(&dom, "phases").contains("send lag"));

    // A sweep: one row per step with the offered rate; -t is each step's length.
    let r = read(&path("sweep.json"));
    assert!(r.plan.profile.description.contains("6 steps of 500ms each"), "{}", r.plan.profile.description);
    let dom = page_of(&dir, &path("sweep.json"), &["http-rate"]);
    let sweep = table(&dom, "sweep");
    for (i, want) in ["1.00 k/s", "2.00 k/s", "4.00 k/s", "8.00 k/s", "16.0 k/s", "32.0 k/s"].iter().enumerate() {
        let cells = row_cells(sweep, &format!("<td>{}</td><td>", i + 1));
        assert_eq!(&cells[2], want, "step {}: {cells:?}", i + 1);
    }
    let text = report(&[path("sweep.json").to_str().unwrap()]);
    assert_eq!(
        text.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()) && l.contains("k/s")).count(),
        6,
        "{text}"
    );

    // A merge of two clients against two servers: the tests table and the matrix.
    let merged = path("mesh.json");
    let files: Vec<String> =
        ["m-a1.json", "m-a2.json", "m-b1.json", "m-b2.json"].iter().map(|f| path(f).display().to_string()).collect();
    let o = util::bin().arg("merge").args(&files).arg("-o").arg(&merged).output().unwrap();
    assert!(o.status.success(), "merge: {}", String::from_utf8_lossy(&o.stderr));
    let r = read(&merged);
    let dom = page_of(&dir, &merged, &["latency-time"]);
    let mesh = table(&dom, "mesh");
    for p in &r.parts {
        let l = p.summary.ways[0].latency.as_ref().unwrap();
        let cell = format!("{} / {}", fmt_ns(l.p50_ns as f64), fmt_ns(l.p99_ns as f64));
        let client = format!("{} {}", p.agent.hostname, p.agent.address);
        let cells = row_cells(mesh, &format!(">{client}<"));
        assert!(cells.contains(&cell), "mesh: {client} → {}: {cell} not in {cells:?}", p.peer);
    }
    assert_eq!(table(&dom, "tests").matches("<tr").count(), 1 + r.parts.len());
    assert!(row_cells(table(&dom, "about"), ">target<")[0].starts_with("2 servers: "), "the header names every server");
    assert!(!dom.contains("merge-of-"), "test ids are never shown raw");

    // Three runs compared: every figure of each, the change from the first, one axis per chart.
    let page = dir.join("compare.html");
    let (a, b, c) = (path("rr-off.json"), path("rr-alert.json"), path("rr-deny.json"));
    let files = [a.to_str().unwrap(), b.to_str().unwrap(), c.to_str().unwrap()];
    report(&[
        files[0],
        files[1],
        files[2],
        "--compare",
        "--labels",
        "off,alert,deny",
        "--html",
        page.to_str().unwrap(),
    ]);
    let dom = check_page(&dir, &page, &["ops", "latency-time", "latency"]);
    let p99s: Vec<String> =
        [&a, &b, &c].iter().map(|f| fmt_ns(read(f).summary.ways[0].latency.as_ref().unwrap().p99_ns as f64)).collect();
    let cells = headline_row(&dom, "p99");
    assert_eq!((&cells[1], &cells[2], &cells[4]), (&p99s[0], &p99s[1], &p99s[2]), "p99 of each run: {cells:?}");
    assert!(cells[3].ends_with('%') || cells[3] == "0", "change from the first: {cells:?}");
    let over_time = figure(&dom, "chart-latency-time");
    for label in ["off: p99", "alert: p99", "deny: p99"] {
        assert!(over_time.contains(label), "compare: {label} not overlaid");
    }
    assert_eq!(over_time.matches("<svg").count(), 1, "one axis for the three runs");
    // The text: the three side by side; the first run's --label names it without --labels.
    let text = report(&[files[0], files[1], files[2], "--compare"]);
    let line = text.lines().find(|l| l.trim_start().starts_with("round-trip latency p99")).unwrap();
    assert!(p99s.iter().all(|p| line.contains(p.as_str())) && text.contains("base off:"), "{text}");

    // Two runs, one with a fixed window: its notes name it, and are not repeated as warnings;
    // the server's notes (warnings of that run only) are shown once, named too.
    let (auto, w) = (path("bulk.json"), path("bulk-w.json"));
    let page = dir.join("compare-w.html");
    report(&[
        auto.to_str().unwrap(),
        w.to_str().unwrap(),
        "--compare",
        "--labels",
        "auto,w64k",
        "--html",
        page.to_str().unwrap(),
    ]);
    let dom = check_page(&dir, &page, &["throughput"]);
    let about = table(&dom, "about");
    let notes: Vec<String> = about
        .split("<tr")
        .filter(|r| r.contains(">note<"))
        .map(|r| row_cells(&format!("<tr{r}"), ">note<")[0].clone())
        .collect();
    assert!(
        !notes.is_empty() && notes.iter().all(|n| n.starts_with("w64k: client socket buffer")),
        "a note names the run it is about: {notes:?}"
    );
    let warns: Vec<&str> = dom.split("<div class=\"warn\">").skip(1).map(|d| &d[..d.find("</div>").unwrap()]).collect();
    assert!(warns.iter().all(|w| !w.contains("client socket buffer")), "plan notes are not warnings too: {warns:?}");
    assert!(
        warns.iter().any(|w| w.starts_with("w64k: warning") && w.contains("server socket buffer")),
        "the server's notes are warnings of their run: {warns:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `netblast report FILE` run to its end: the largest resident memory it reached, in bytes, as
/// GNU time measures it (this test process's own `wait4` would count the pages the child
/// shared with it before its exec).
fn report_peak_rss(file: &Path) -> u64 {
    let o = Command::new("/usr/bin/time")
        .args(["-f", "peak %M"])
        .arg(env!("CARGO_BIN_EXE_netblast"))
        .arg("report")
        .arg(file)
        .stdout(std::process::Stdio::null())
        .output()
        .expect("/usr/bin/time (Debian's time, scripts/setup.sh installs it)");
    assert!(o.status.success(), "report {}: {}", file.display(), util::said(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    let kb = err.lines().rev().find_map(|l| l.strip_prefix("peak ")).and_then(|k| k.trim().parse::<u64>().ok());
    kb.unwrap_or_else(|| panic!("no peak in /usr/bin/time's output: {err}")) * 1024
}

#[test]
fn a_huge_result_is_reported_in_memory_near_its_size() {
    // Found in the audit: `report` of a 198 MB result peaked at 1.6 GB. The check for a
    // campaign's summary built the whole file into a JSON tree (a 196 MB result: 1.8 GB, now
    // 0.59 GB with the same text). Here: 61 MB, 598 MB before, 232 MB after.
    let (serve, addr) = util::spawn_server();
    let _serve = KillOnDrop(serve);
    let dir = util::tempdir::Dir::new("huge-result");
    let small = dir.path().join("small.json");
    let o = util::run_cmd()
        .args(["--target", &addr.to_string(), "-t", "1", "-i", "100ms", "-o"])
        .arg(&small)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", util::said(&o));
    // The run's first interval 100 000 times over, 10 000 s of them.
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&small).unwrap()).unwrap();
    let first = v["intervals"][0].clone();
    let intervals: Vec<serde_json::Value> = (0..100_000u32)
        .map(|i| {
            let mut iv = first.clone();
            iv["index"] = i.into();
            iv["start_s"] = (f64::from(i) * 0.1).into();
            iv["end_s"] = (f64::from(i + 1) * 0.1).into();
            iv
        })
        .collect();
    v["intervals"] = intervals.into();
    let huge = dir.path().join("huge.json");
    std::fs::write(&huge, serde_json::to_vec(&v).unwrap()).unwrap();
    drop(v);
    let size = std::fs::metadata(&huge).unwrap().len();
    let peak = report_peak_rss(&huge);
    assert!(
        peak < size * 4 + (64 << 20),
        "report of a {:.0} MB result peaked at {:.0} MB (at most 4 times its size and 64 MB)",
        size as f64 / 1e6,
        peak as f64 / 1e6
    );
}
