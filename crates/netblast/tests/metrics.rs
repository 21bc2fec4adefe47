//! `serve --metrics` (issue 11): scraped during and after real runs, parsed with a real
//! exposition-format parser (the `prometheus-parse` crate), held against the runs' results.

use crate::util::{self, KillOnDrop, histogram_count, scrape, value};
use netblast_spec::RunResult;
use std::io::BufRead;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::Duration;

/// `netblast serve --metrics 127.0.0.1:0 --http 0`: (child, data port, HTTP port, metrics address).
fn serve_with_metrics() -> (KillOnDrop, SocketAddr, SocketAddr, SocketAddr) {
    let mut child = util::bin()
        .args(["serve", "--bind", "127.0.0.1", "--port", "0", "--http", "0", "--probe", "tcpinfo"])
        .args(["--metrics", "127.0.0.1:0"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let addr = line.split(|c: char| c.is_whitespace() || c == '/').find_map(|w| w.parse::<SocketAddr>().ok());
            if let Some(a) = addr {
                let _ = tx.send((line.clone(), a));
            }
        }
    });
    let (mut data, mut http, mut metrics) = (None, None, None);
    while data.is_none() || http.is_none() || metrics.is_none() {
        let (line, a) = rx.recv_timeout(Duration::from_secs(10)).expect("serve printed its addresses");
        if line.contains("data port") {
            data = Some(a);
        } else if line.contains("HTTP (") {
            http = Some(a);
        } else if line.contains("metrics on") {
            metrics = Some(a);
        }
    }
    (KillOnDrop(child), data.unwrap(), http.unwrap(), metrics.unwrap())
}

#[test]
fn serve_metrics_scraped_during_and_after_runs_match_the_results() {
    let (_serve, data, http, at) = serve_with_metrics();
    let s = scrape(at);
    assert_eq!(value(&s, "netblast_serve_tests_active", &[]), Some(0.0));

    // During a bulk run: one test active, bytes flowing.
    let run = util::run_cmd()
        .args(["--target", &data.to_string(), "-t", "3", "-i", "500ms", "--json", "-q"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1800));
    let during = scrape(at);
    assert_eq!(value(&during, "netblast_serve_tests_active", &[]), Some(1.0), "one test running");
    let moving = value(&during, "netblast_serve_bytes_total", &[("direction", "received")]).unwrap_or(0.0);
    assert!(moving > 0.0, "bytes counted while the test runs");
    let out = util::wait_output(run, Duration::from_secs(30));
    assert!(out.status.success());
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    let received = r.summary.ways[0].receiver.as_ref().unwrap().bytes;

    // After: the counters hold exactly what the result says the server received.
    let after = scrape(at);
    assert_eq!(value(&after, "netblast_serve_tests_active", &[]), Some(0.0));
    assert_eq!(value(&after, "netblast_serve_tests_total", &[("result", "ok")]), Some(1.0));
    assert_eq!(value(&after, "netblast_serve_bytes_total", &[("direction", "received")]), Some(received as f64));
    assert!(moving < received as f64, "mid-run figure below the total");

    // HTTP: every response counted by code, every one in the latency histogram.
    let url = format!("http://{http}/?size=100");
    let out = util::run_cmd()
        .args(["--url", &url, "--profile", "http-max", "-c", "2", "-t", "1", "--json", "-q"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // What Prometheus's own linter says of the text a plain scraper gets (it exited 3 on
    // "no help text" for every counter, and the answer was OpenMetrics whatever was asked).
    util::promtool_passes(at);
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    let h = r.summary.http.unwrap();
    let s = scrape(at);
    let served = value(&s, "netblast_serve_http_responses_total", &[("code", "200")]).unwrap();
    // The responder counts what it answered; the client what came back before its bound.
    assert!(served >= h.succeeded as f64 && served <= h.sent as f64, "served {served}, client {h:?}");
    assert_eq!(histogram_count(&s, "netblast_serve_http_latency_seconds"), served);
    assert_eq!(value(&s, "netblast_serve_http_response_bytes_total", &[]), Some(served * 100.0));
}

#[test]
fn a_tcp_health_probe_is_counted_not_refused() {
    // Found by a Kubernetes user: the readiness probe (a TCP connect to the data port, closed
    // at once) logged "refused connection: closed before a full netblast handshake" every
    // 10 s, ~17 000 warnings a day per pod.
    let (_serve, data, _http, at) = serve_with_metrics();
    for _ in 0..3 {
        drop(std::net::TcpStream::connect(data).unwrap());
    }
    // A peer that speaks something else is still refused.
    let mut c = std::net::TcpStream::connect(data).unwrap();
    std::io::Write::write_all(&mut c, b"GET / HTTP/1.1\r\n\r\n").unwrap();
    drop(c);
    // Each connection is its own task: the refusal can be counted before the last probe's
    // close is read (it failed so beside the other tests), so wait for both figures.
    let t = std::time::Instant::now();
    let mut s = scrape(at);
    while (value(&s, "netblast_serve_refused_total", &[("reason", "invalid")]).is_none()
        || value(&s, "netblast_serve_probes_total", &[]) < Some(3.0))
        && t.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(50));
        s = scrape(at);
    }
    assert_eq!(value(&s, "netblast_serve_probes_total", &[]), Some(3.0));
    assert_eq!(value(&s, "netblast_serve_refused_total", &[("reason", "invalid")]), Some(1.0));
}

/// Slow connections to `to` from `from`: `n` of them, each sending half a request header and
/// no more, each opened again as soon as the server closes it, until `stop` (at most 60 s).
fn slow_scrapers(from: [u8; 4], to: SocketAddr, n: usize, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    use std::io::Write;
    let open = |_| {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
        s.bind(&SocketAddr::from((from, 0)).into()).ok()?;
        s.connect_timeout(&to.into(), Duration::from_millis(500)).ok()?;
        let mut c: std::net::TcpStream = s.into();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n").ok()?;
        c.set_nonblocking(true).ok()?;
        Some(c)
    };
    util::keep_reopening(n, open, &stop, Duration::from_secs(60), Duration::from_millis(5));
}

#[test]
fn a_scraper_is_answered_while_a_stranger_holds_slow_connections() {
    // Found in the audit: 64 slow connections from one address, reopened as soon as closed,
    // made 10 of 12 scrapes of `serve --metrics` fail (the endpoint held 64, each for 10 s).
    // Here two addresses each keep 64 open.
    let (_serve, _, _, metrics) = serve_with_metrics();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let strangers: Vec<_> = [[127, 0, 0, 2], [127, 0, 0, 3]]
        .into_iter()
        .map(|from| {
            let stop = stop.clone();
            std::thread::spawn(move || slow_scrapers(from, metrics, 64, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    for _ in 0..12 {
        let s = util::scrape(metrics);
        assert!(util::value(&s, "netblast_serve_tests_active", &[]).is_some(), "a whole exposition");
        std::thread::sleep(Duration::from_millis(100));
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for s in strangers {
        s.join().unwrap();
    }
}
