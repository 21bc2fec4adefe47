//! cps with no agent (issue 54): connections and TLS handshakes against a server that is not
//! netblast, judged by the server's own counters (nginx's stub_status `accepts`), what the
//! server answered named, the version, cipher and resumption of each handshake.

use netblast_spec::result::{ConnCounts, MsgTotals, RunResult};
use std::io::{Read, Write};
use std::time::Duration;

/// nginx's count of the connections it accepted (its stub_status, read over a connection of
/// its own, which the count includes).
fn accepts(http_port: u16) -> u64 {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", http_port)).unwrap();
    s.write_all(b"GET /nginx_status HTTP/1.0\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    // "server accepts handled requests\n 12 12 3"
    let line = text.lines().skip_while(|l| !l.starts_with("server accepts")).nth(1).unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

/// `netblast run ARGS --json`'s result, the run having succeeded.
fn run(args: &[&str]) -> RunResult {
    let out = crate::util::run_cmd().args(args).arg("--json").output().unwrap();
    assert!(out.status.success(), "{args:?}: {}", crate::util::said(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn totals(r: &RunResult) -> (MsgTotals, ConnCounts) {
    let m = r.summary.ways[0].msgs.unwrap();
    (m, m.conns.unwrap())
}

/// Runs `args` against nginx and checks the client's count of completed connections against
/// nginx's accepts within 1%: the result.
fn counted_by_nginx(http_port: u16, args: &[&str]) -> RunResult {
    let before = accepts(http_port);
    let r = run(args);
    // The second reading is a connection of its own.
    let served = accepts(http_port) - before - 1;
    let (m, c) = totals(&r);
    assert!(r.complete, "{args:?}: {:?}", r.errors);
    assert_eq!(c.failed(), 0, "{args:?}: {c:?}");
    assert!(m.sent >= 200, "{args:?}: only {} connections", m.sent);
    let off = (m.sent as f64 - served as f64).abs() / served as f64;
    assert!(off <= 0.01, "{args:?}: the client counted {}, nginx accepted {served}", m.sent);
    assert!(m.received.is_none() && r.server.is_none(), "no server-side figures without an agent");
    r
}

#[test]
fn connections_and_tls_handshakes_agree_with_nginx_accepts() {
    let Some(nginx) = crate::util::nginx_limited("2000r/s") else { return };
    let (http, https) = (nginx.http, nginx.https);
    let (http_t, https_t) = (format!("127.0.0.1:{http}"), format!("127.0.0.1:{https}"));
    // Connect and close: the cps profile with no agent (its close = server becomes fin).
    let r = counted_by_nginx(http, &["--profile", "cps", "--no-agent", &http_t, "-t", "2"]);
    let (m, c) = totals(&r);
    assert_eq!(c.answers.map(|a| a.nothing), Some(m.sent), "{c:?}");
    // A request and the response read to the server's close: every answer an HTTP 200.
    let get =
        ["--profile", "cps", "--no-agent", &http_t, "-t", "2", "--send", r"GET / HTTP/1.0\r\n\r\n", "--read", "all"];
    let r = counted_by_nginx(http, &get);
    let (m, c) = totals(&r);
    let a = c.answers.unwrap();
    assert_eq!((a.http, a.http_status), (m.sent, 200), "{a:?}");
    assert!(a.bytes >= m.sent * 45, "each answer holds the 45-byte page: {a:?}");
    // TLS handshakes, full, each version held; then resumed.
    for (version, code) in [("1.3", 0x0304), ("1.2", 0x0303)] {
        let args = ["--profile", "tls-handshakes", &https_t, "-k", "--tls-version", version, "-t", "2"];
        let r = counted_by_nginx(http, &args);
        let (m, c) = totals(&r);
        let t = c.tls.unwrap();
        assert_eq!((t.full, t.resumed, t.version), (m.sent, 0, code), "{version}: {t:?}");
        assert!(t.cipher_name().starts_with("TLS_"), "{}", t.cipher_name());
        let args = ["--profile", "tls-handshakes", &https_t, "-k", "--tls-version", version, "--resume", "-t", "2"];
        let r = counted_by_nginx(http, &args);
        let (m, c) = totals(&r);
        let t = c.tls.unwrap();
        assert_eq!(t.full + t.resumed, m.sent, "{t:?}");
        assert!(t.resumed * 10 >= m.sent * 9, "{version}: nginx resumes sessions, yet {t:?}");
    }
}

#[test]
fn what_the_server_said_is_named_and_the_report_says_what_is_not_measured() {
    // A banner server: says hello on every connection, as SSH and SMTP servers do.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (flag, t0) = (stop.clone(), std::time::Instant::now());
    l.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        while !flag.load(std::sync::atomic::Ordering::Relaxed) && t0.elapsed() < Duration::from_secs(30) {
            match l.accept() {
                Ok((mut c, _)) => {
                    let _ = c.write_all(b"SSH-2.0-banner\r\n");
                }
                Err(_) => std::thread::sleep(Duration::from_millis(1)),
            }
        }
    });
    let target = format!("127.0.0.1:{port}");
    let args = ["--profile", "cps", "--no-agent", &target, "-t", "1", "-P", "1", "--read", "first", "--rate", "200"];
    let r = run(&args);
    let (m, c) = totals(&r);
    let a = c.answers.unwrap();
    assert!(m.sent >= 100 && a.banner == m.sent && a.http == 0, "{m:?}");
    let text = crate::util::run_cmd().args(args).output().unwrap();
    let text = String::from_utf8_lossy(&text.stdout);
    for said in ["measured by the client alone", "no server-side count, CPU or kernel figures", "other bytes first"] {
        assert!(text.contains(said), "{said:?} not in:\n{text}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap();
}

#[test]
fn agentless_settings_are_refused_where_they_mean_nothing() {
    for (args, names) in [
        (vec!["--profile", "cps", "--send", "x"], "cps.send"),
        (vec!["--profile", "cps", "--no-agent", "--tls-version", "1.3"], "cps.tls_version"),
        (vec!["--profile", "cps", "--no-agent", "--send", r"\q"], "cps.send"),
    ] {
        let out = crate::util::run_cmd().args(&args).arg("127.0.0.1:1").output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(names), "{args:?}: {err}");
    }
    // An untrusted certificate stops the run at the first handshake, saying why.
    let Some(nginx) = crate::util::nginx_limited("2000r/s") else { return };
    let https = nginx.https;
    let target = format!("127.0.0.1:{https}");
    let out =
        crate::util::run_cmd().args(["--profile", "tls-handshakes", &target, "-t", "1", "--json"]).output().unwrap();
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", crate::util::said(&out)));
    let why = r.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>().join("; ");
    assert!(!r.complete && why.contains("TLS handshake with") && why.contains("certificate"), "{why}");
}
