//! iperf3 habits (issue 54), each as an iperf3 user types it: `--json-stream` piped into `jq`
//! line by line while the run lasts, `-c HOST`, `-6` (IPv6 for every kind, the socket family
//! read back from `ss`), `-n 1G`, `--blockcount`, `--logfile`, `--timestamps`,
//! `--get-server-output`, and the letters that keep netblast's meaning saying so.

use crate::util::{self, KillOnDrop};
use netblast_spec::result::RunResult;
use std::io::BufRead;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// A `netblast serve` on `::` (IPv4 and IPv6), an ephemeral port: it, and the port.
fn serve_dual() -> (KillOnDrop, u16) {
    let mut c = util::bin();
    c.args(["serve", "--probe", "tcpinfo", "--bind", "::", "--port", "0"]);
    let (child, addr) = util::spawn_server_from(c);
    (KillOnDrop(child), addr.port())
}

#[test]
fn json_stream_lines_parse_alone_and_arrive_while_the_run_lasts() {
    let (_serve, port) = serve_dual();
    // As a user pipes it: `netblast run ... --json-stream | jq -c .`, read line by line.
    let cmd = format!(
        "{} run --probe tcpinfo 127.0.0.1 -p {port} -t 3 -i 1s --json-stream | jq --unbuffered -c .",
        env!("CARGO_BIN_EXE_netblast")
    );
    let mut child = std::process::Command::new("bash")
        .args(["-o", "pipefail", "-c", &cmd])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first["event"], "start", "{first}");
    assert!(first["data"]["plan"]["profile"].is_object() && first["data"]["test_id"].is_string());
    let interval: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    // The first interval is read while the run still goes (it lasts 3 s past its start).
    let running = child.try_wait().unwrap().is_none();
    assert!(running, "the first interval came only after the run ended ({:?})", t0.elapsed());
    assert_eq!((interval["event"].as_str(), interval["data"]["end_s"].as_f64()), (Some("interval"), Some(1.0)));
    let rest: Vec<serde_json::Value> = lines.map(|l| serde_json::from_str(&l.unwrap()).unwrap()).collect();
    let out = util::wait_output(child, Duration::from_secs(30));
    assert!(out.status.success(), "{}", util::said(&out));
    let events: Vec<&str> = rest.iter().map(|v| v["event"].as_str().unwrap()).collect();
    assert_eq!(events, ["interval", "interval", "end"], "{rest:?}");
    let result: RunResult = serde_json::from_value(rest[2]["data"].clone()).unwrap();
    assert!(result.complete && result.intervals.len() == 3, "{:?}", result.errors);
    // The streamed intervals are the result's.
    assert_eq!(rest[0]["data"]["end_s"].as_f64(), Some(result.intervals[1].end_s));
}

/// `netblast run ARGS` (TCP_INFO statistics), its output.
fn run(args: &[&str]) -> std::process::Output {
    util::run_cmd().args(args).output().unwrap()
}

fn result_of(out: &std::process::Output) -> RunResult {
    assert!(out.status.success(), "{}", util::said(out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn c_host_and_ipv6_work_for_every_kind() {
    let (_serve, port) = serve_dual();
    let p = port.to_string();
    // iperf3's -c HOST is the target; -6 picks the IPv6 address; the sockets are IPv6 ones.
    for (kind, extra) in [
        ("bulk", vec![]),
        ("udp", vec!["-u", "-b", "20M"]),
        ("rr", vec!["--profile", "latency"]),
        ("cps", vec!["--profile", "cps"]),
    ] {
        let child = util::run_cmd()
            .args([&["-c", "::1", "-6", "-p", &p, "-t", "2", "--json"], &extra[..]].concat())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // While it runs, the server's kernel holds IPv6 connections from ::1 on the data port.
        let mut v6 = 0;
        let t0 = Instant::now();
        while v6 == 0 && t0.elapsed() < Duration::from_secs(4) {
            let ss = std::process::Command::new("ss")
                .args(["-6tnH", "state", "established", &format!("sport = :{port}")])
                .output()
                .unwrap();
            v6 = String::from_utf8_lossy(&ss.stdout).lines().filter(|l| l.contains("[::1]")).count();
            std::thread::sleep(Duration::from_millis(100));
        }
        let r = result_of(&util::wait_output(child, Duration::from_secs(30)));
        assert!(v6 > 0, "{kind}: no IPv6 connection to the server seen by ss");
        assert!(r.complete, "{kind}: {:?}", r.errors);
        assert!(r.streams.iter().all(|s| s.remote == format!("[::1]:{port}")), "{kind}: {:?}", r.streams);
    }
    // HTTP over IPv6: the responder on [::1].
    let http = std::net::TcpListener::bind("[::1]:0").unwrap().local_addr().unwrap().port().to_string();
    let mut c = util::bin();
    c.args(["serve", "--probe", "tcpinfo", "--bind", "::", "--port", "0", "--http", &http]);
    let (child, _) = util::spawn_server_from(c);
    let _responder = KillOnDrop(child);
    let r = result_of(&run(&["--url", &format!("http://[::1]:{http}/"), "-c", "1", "-t", "1", "--json"]));
    assert!(r.complete && r.summary.http.as_ref().is_some_and(|h| h.succeeded > 0), "{:?}", r.errors);
    // -4 with an IPv6 address, -6 with an IPv4 one: refused, naming what the host has.
    let out = run(&["-c", "::1", "-4", "-p", &p, "-t", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(util::said(&out).contains("-4: ::1 is an IPv6 address"), "{}", util::said(&out));
    // -c with a count stays wrk's connections: an HTTP flag, refused for bulk naming it.
    let out = run(&["127.0.0.1", "-p", &p, "-c", "4", "-t", "1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(util::said(&out).contains("--connections"), "{}", util::said(&out));
}

#[test]
fn byte_and_block_counts_bound_a_bulk_run_as_iperf3s_do() {
    let (_serve, port) = serve_dual();
    let p = port.to_string();
    let r = result_of(&run(&["127.0.0.1", "-p", &p, "-n", "1G", "--json"]));
    assert_eq!(r.summary.ways[0].sender.bytes, 1 << 30);
    assert!(r.complete);
    let r = result_of(&run(&["127.0.0.1", "-p", &p, "--blockcount", "1000", "-l", "64K", "--json"]));
    assert_eq!(r.summary.ways[0].sender.bytes, 1000 * 65536);
    // -n on an rr test: neither a byte count nor a request count there.
    let out = run(&["127.0.0.1", "-p", &p, "--profile", "latency", "-n", "1000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(util::said(&out).contains("-n") && util::said(&out).contains("bulk and http"), "{}", util::said(&out));
    // -V is iperf3's verbose: each stream's socket as the kernel holds it (the mark read back).
    let out = run(&["127.0.0.1", "-p", &p, "-t", "1", "-V", "--dscp", "AF41", "-C", "reno"]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && said.contains("socket: SO_SNDBUF"), "{said}");
    assert!(said.contains("congestion control reno") && said.contains("DSCP AF41 (34)"), "{said}");
    // ... and the interface it leaves by, with its offloads as ethtool -k reads them.
    assert!(said.contains("via lo: TSO "), "{said}");
    if let Ok(k) = std::process::Command::new("ethtool").args(["-k", "lo"]).output() {
        let k = String::from_utf8_lossy(&k.stdout);
        let on = |name: &str| k.lines().find(|l| l.starts_with(name)).map(|l| l.contains(": on"));
        let want = [
            ("TSO", on("tcp-segmentation-offload:")),
            ("GSO", on("generic-segmentation-offload:")),
            ("GRO", on("generic-receive-offload:")),
            ("SG", on("scatter-gather:")),
            ("tx-checksum", on("tx-checksumming:")),
            ("rx-checksum", on("rx-checksumming:")),
        ];
        for (name, v) in want {
            let v = v.unwrap_or_else(|| panic!("ethtool -k lo shows no {name}:\n{k}"));
            let word = format!("{name} {}", if v { "on" } else { "off" });
            assert!(said.contains(&word), "ethtool -k lo says {word}: {said}");
        }
    }
    let v = util::bin().arg("--version").output().unwrap();
    assert!(v.status.success() && String::from_utf8_lossy(&v.stdout).starts_with("netblast "));
    // -k 1000 is iperf3's block count: said, with the spelling here.
    let out = run(&["127.0.0.1", "-p", &p, "-k", "1000"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(util::said(&out).contains("--blockcount 1000"), "{}", util::said(&out));
}

#[test]
fn logfile_timestamps_and_server_output_are_iperf3s() {
    let (_serve, port) = serve_dual();
    let p = port.to_string();
    let dir = util::tempdir::Dir::new("habits");
    let log = dir.path().join("run.log");
    let log_s = log.display().to_string();
    let out = run(&["127.0.0.1", "-p", &p, "-t", "2", "-i", "1s", "--logfile", &log_s, "--timestamps=%Y-%m-%d ", "-q"]);
    assert!(out.status.success(), "{}", util::said(&out));
    assert!(out.stdout.is_empty(), "stdout has {:?}", String::from_utf8_lossy(&out.stdout));
    let text = std::fs::read_to_string(&log).unwrap();
    let year = netblast_spec::units::fmt_rfc3339(netblast_engine::exec::clock::now_unix_ns())[..4].to_string();
    assert!(text.lines().count() > 3 && text.lines().all(|l| l.starts_with(&year)), "{text}");
    assert!(text.contains("sender"), "{text}");
    // A second run appends, as iperf3's --logfile does.
    let out = run(&["127.0.0.1", "-p", &p, "-t", "1", "--logfile", &log_s, "--get-server-output", "-q"]);
    assert!(out.status.success(), "{}", util::said(&out));
    let more = std::fs::read_to_string(&log).unwrap();
    assert!(more.starts_with(&text), "the second run replaced the log");
    let server = more.split("Server output:\n").nth(1).expect("the server's lines");
    assert!(server.contains("netblast serve: 127.0.0.1:") && server.contains("bulk test") && server.contains(": ok"));
    // The result keeps them too.
    let r = result_of(&run(&["127.0.0.1", "-p", &p, "-t", "1", "--json"]));
    assert_eq!(r.server_output.len(), 1, "{:?}", r.server_output);
    assert!(r.server_output[0].contains(&format!("test {}", r.test_id)), "{:?}", r.server_output);
    // A log file that cannot be written is refused before anything runs.
    let out = run(&["127.0.0.1", "-p", &p, "-t", "1", "--logfile", "/nonexistent/dir/x.log"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(util::said(&out).contains("--logfile /nonexistent/dir/x.log"), "{}", util::said(&out));
}

#[test]
fn a_test_aimed_at_an_http_server_says_it_is_one_and_what_to_run() {
    // A server that answers whatever comes with an HTTP error, as nginx does to a netblast hello.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port().to_string();
    let answer = std::thread::spawn(move || {
        for c in l.incoming().take(1) {
            let mut c = c.unwrap();
            let mut buf = [0u8; 512];
            let _ = std::io::Read::read(&mut c, &mut buf);
            let _ = std::io::Write::write_all(&mut c, b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let out = run(&["127.0.0.1", "-p", &port, "--profile", "cps", "-t", "1"]);
    answer.join().unwrap();
    let said = util::said(&out);
    assert_ne!(out.status.code(), Some(0), "{said}");
    assert!(said.contains("an HTTP server") && said.contains("--url http://"), "{said}");
    assert!(!said.contains("1213486160"), "{said}");
}

#[test]
fn bidir_takes_a_rate_per_direction() {
    let (_serve, port) = serve_dual();
    let p = port.to_string();
    use netblast_spec::profile::Way;
    let rate = |r: &RunResult, way: Way| {
        let w = r.summary.ways.iter().find(|w| w.way == way).unwrap();
        w.receiver.as_ref().unwrap_or(&w.sender).bits_per_s
    };
    // TCP: each way held at its own rate by its own sender (the server's down).
    let r = result_of(&run(&["127.0.0.1", "-p", &p, "-t", "2", "--bidir", "-b", "200M/50M", "--json"]));
    let (up, down) = (rate(&r, Way::Up), rate(&r, Way::Down));
    assert!((up / 200e6 - 1.0).abs() < 0.05 && (down / 50e6 - 1.0).abs() < 0.05, "up {up}, down {down}");
    assert!(r.plan.profile.description.contains("paced to 200 Mbits/sec up and 50.0 Mbits/sec down"));
    // UDP: the same, in datagrams.
    let r = result_of(&run(&["127.0.0.1", "-p", &p, "-t", "2", "-u", "--bidir", "-b", "100M/20M", "--json"]));
    let sent = |way: Way| r.summary.ways.iter().find(|w| w.way == way).unwrap().sender.bits_per_s;
    assert!((sent(Way::Up) / 100e6 - 1.0).abs() < 0.05, "{}", sent(Way::Up));
    assert!((sent(Way::Down) / 20e6 - 1.0).abs() < 0.05, "{}", sent(Way::Down));
    // A rate per way and a range together, and an up limit with an unlimited down: refused.
    for (b, says) in [("1G..2G/3G", "not both"), ("1G/0", "give both rates")] {
        let out = run(&["127.0.0.1", "-p", &p, "-t", "1", "-b", b]);
        assert_eq!(out.status.code(), Some(2), "{b}");
        assert!(util::said(&out).contains(says), "{b}: {}", util::said(&out));
    }
}
