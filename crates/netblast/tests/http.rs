//! HTTP floods against the built-in responder and against a real nginx.

use crate::util::{self, InPair};
use netblast_spec::RunResult;
use netblast_spec::profile::{HttpSection, HttpVersion, Profile, Workload};
use netblast_spec::units::{Dur, Rate};
use std::net::SocketAddr;
use std::time::Duration;

/// The built-in responder on an ephemeral loopback port (TLS with a self-signed certificate
/// when `tls`), stopped on drop.
pub(crate) struct Responder {
    pub(crate) addr: SocketAddr,
    _bg: netblast_agent::Background,
}

impl Responder {
    pub(crate) fn start(tls: bool) -> Responder {
        util::lane();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let tls =
            tls.then(|| netblast_agent::http::tls_config(None, vec!["localhost".into(), "127.0.0.1".into()]).unwrap());
        let bg = netblast_agent::Background::http(listener, tls, Default::default(), 2).unwrap();
        Responder { addr: bg.addr(), _bg: bg }
    }
}

fn profile(edit: impl FnOnce(&mut Profile, &mut HttpSection)) -> Profile {
    let (mut p, _) = Profile::load("http-max").unwrap();
    p.run.duration = Some("2s".parse().unwrap());
    p.run.interval = Some("500ms".parse().unwrap());
    let mut h = p.workload.http().unwrap().clone();
    h.connections = 10;
    edit(&mut p, &mut h);
    p.workload = Workload::Http(Box::new(h));
    p.validate("test").unwrap();
    p
}

fn http(r: &RunResult) -> &netblast_spec::result::HttpSummary {
    assert!(r.complete, "{:?}", r.errors);
    r.summary.http.as_ref().expect("http summary")
}

/// The summary of a run in which every request failed: incomplete, and saying why.
fn all_failed(r: &RunResult) -> &netblast_spec::result::HttpSummary {
    assert!(!r.complete, "a run without one response is not complete");
    assert!(r.errors.iter().any(|e| e.message.starts_with("every request failed")), "{:?}", r.errors);
    r.summary.http.as_ref().expect("http summary")
}

fn status(r: &RunResult, code: &str) -> u64 {
    http(r).status_codes.get(code).copied().unwrap_or(0)
}

#[test]
fn request_counts_are_exact_and_statuses_counted() {
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(1000);
            h.urls = vec!["/".into(), "/?status=503".into()];
            h.weights = Some(vec![3, 1]);
        }),
    );
    let h = http(&r);
    assert_eq!((h.sent, h.completed), (1000, 1000));
    assert_eq!(status(&r, "200"), 750);
    assert_eq!(status(&r, "503"), 250);
    assert_eq!(h.succeeded, 750);
    assert!((h.success_ratio - 0.75).abs() < 1e-9);
    assert_eq!(h.connections.established, 10, "keep-alive: one connection per slot");
    assert_eq!(h.latency.count, 1000);
    assert!(h.bytes_received > 1000 * 45 && h.bytes_sent > 0);
    let per_interval: u64 = r.intervals.iter().filter_map(|i| i.http.as_ref()).map(|x| x.completed).sum();
    assert_eq!(per_interval, 1000);
}

#[test]
fn without_keepalive_every_request_opens_a_connection() {
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(200);
            h.keepalive = false;
        }),
    );
    let h = http(&r);
    assert_eq!(h.completed, 200);
    assert_eq!(h.connections.established, 200);
    assert_eq!(h.phases.connect.as_ref().unwrap().count, 200);
    let tcp = h.tcp.as_ref().expect("kernel TCP statistics");
    assert_eq!(tcp.connections, 200, "every connection's TCP_INFO was taken as it closed");
    assert_eq!(tcp.srtt.as_ref().map(|s| s.count), Some(200));
    assert!(tcp.segs_out >= 200 * 3, "SYN, request and FIN at least: {}", tcp.segs_out);
}

#[test]
fn kernel_tcp_statistics_cover_every_connection_and_only_when_asked() {
    let srv = Responder::start(false);
    let run = |version: HttpVersion, probe: &netblast_probe::Probe| {
        let p = profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(500);
            h.version = version;
        });
        util::run_with(srv.addr, p, probe)
    };
    for version in [HttpVersion::Http1, HttpVersion::Http2] {
        // HTTP/2 connections are owned by their driver tasks: sampled when the worker ends.
        let r = run(version, &netblast_probe::Probe::tcp_info());
        let h = http(&r);
        let tcp = h.tcp.as_ref().expect("kernel TCP statistics");
        assert_eq!(tcp.connections, 10, "{version:?}");
        assert_eq!(tcp.connections, h.connections.established);
        assert!(tcp.segs_out >= 500, "{version:?}: a segment per request at least: {}", tcp.segs_out);
        assert!(tcp.spurious_retransmits.is_some_and(|s| s <= tcp.retransmits));
        assert!(tcp.kernel_rtt.is_none(), "TCP_INFO has no RTT distribution");
        assert_eq!(r.probe.tcp_source, "tcp_info");
    }
    let off = netblast_probe::Probe::open(netblast_probe::ProbeMode::Off).unwrap();
    let r = run(HttpVersion::Http1, &off);
    assert!(http(&r).tcp.is_none(), "--probe off collects nothing");
}

#[test]
fn https_http2_and_h2c_work() {
    let tls = Responder::start(true);
    for version in [HttpVersion::Http1, HttpVersion::Http2] {
        let r = util::run(
            tls.addr,
            profile(|p, h| {
                p.run.duration = None;
                h.requests = Some(300);
                h.tls = true;
                h.insecure = true;
                h.version = version;
            }),
        );
        let h = http(&r);
        assert!(h.tls);
        assert_eq!((h.completed, status(&r, "200")), (300, 300), "{version:?}");
        assert_eq!(h.phases.tls.as_ref().unwrap().count, 10, "one TLS handshake per connection");
    }
    let plain = Responder::start(false);
    let r = util::run(
        plain.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(300);
            h.version = HttpVersion::Http2;
        }),
    );
    assert_eq!(http(&r).completed, 300, "h2c with prior knowledge");
    assert_eq!(http(&r).version, "http2");
}

/// HTTP/2 request bodies go out as the server's flow-control windows allow: 3 MB bodies,
/// above any window a server grants at first, arrive whole (bytes sent cover every body), and
/// headers HTTP/2 forbids are left out instead of breaking every request.
#[test]
fn http2_request_bodies_larger_than_the_window_arrive_whole() {
    let srv = Responder::start(false);
    let body = "x".repeat(3_000_000);
    // 2 connections x 4 streams over HTTP/2, a fixed number of requests.
    let lanes = |p: &mut Profile, h: &mut HttpSection, requests: u64| {
        p.run.duration = None;
        h.requests = Some(requests);
        (h.connections, h.streams, h.version) = (2, 4, HttpVersion::Http2);
    };
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            lanes(p, h, 20);
            h.method = "POST".into();
            h.body = Some(body.clone());
            h.headers = vec!["Connection: keep-alive".into(), "Upgrade: h2c".into()];
        }),
    );
    let h = http(&r);
    assert_eq!((h.completed, status(&r, "200")), (20, 20), "{:?}", h.errors);
    assert!(h.bytes_sent >= 20 * 3_000_000, "{} bytes sent for 20 bodies of 3 MB", h.bytes_sent);
    // Responses: 8 streams of 3 MiB at once are more than the 5 MiB connection window, so
    // they complete only if the client hands the window back as it reads.
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            lanes(p, h, 40);
            h.urls = vec!["/?size=3MiB".into()];
        }),
    );
    let h = http(&r);
    assert_eq!((h.completed, status(&r, "200")), (40, 40), "{:?}", h.errors);
    assert!(h.bytes_received >= 40 * (3 << 20), "{} bytes read for 40 bodies of 3 MiB", h.bytes_received);
}

#[test]
fn http2_streams_multiplex_requests_on_few_connections() {
    let srv = Responder::start(false);
    let t = std::time::Instant::now();
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.urls = vec!["/?delay=20ms".into()];
            h.version = HttpVersion::Http2;
            h.connections = 2;
            h.streams = 10;
            h.requests = Some(400);
        }),
    );
    let h = http(&r);
    assert_eq!((h.completed, status(&r, "200")), (400, 400));
    assert_eq!(h.connections.established, 2, "the streams share their connection");
    assert_eq!(h.connections.peak_open, 2);
    assert_eq!(h.tcp.as_ref().map(|t| t.connections), Some(2));
    // 20 requests in flight at 20 ms each: about 0.4 s; one per connection would take 4 s.
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}: the streams did not run concurrently", t.elapsed());
    assert!(h.latency.p50_ns >= 20_000_000, "each request still waited its 20 ms");
}

#[test]
fn an_untrusted_certificate_stops_the_run_at_its_first_handshakes_and_names_the_fix() {
    // Found as a new user: HTTPS to a self-signed server without -k ran its whole duration and
    // counted `invalid peer certificate: UnknownIssuer` thousands of times.
    let tls = Responder::start(true);
    for open_loop in [false, true] {
        let r = util::run(
            tls.addr,
            profile(|p, h| {
                p.run.duration = Some(Dur(Duration::from_secs(60)));
                h.tls = true;
                if open_loop {
                    h.rate = Some(Rate(2000.0));
                }
            }),
        );
        let what = if open_loop { "open loop" } else { "closed loop" };
        assert!(!r.complete, "{what}");
        let h = r.summary.http.as_ref().expect("http summary");
        assert_eq!(h.completed, 0, "{what}");
        let failed = h.errors.iter().find(|e| e.kind == "certificate").map(|e| e.count).unwrap_or(0);
        assert!(
            (1..=10).contains(&failed),
            "{what}: one failed handshake per connection at most, not one per request: {:?}",
            h.errors
        );
        assert!(h.seconds < 10.0, "{what}: the 60 s run went on for {} s", h.seconds);
        let stop = r
            .errors
            .iter()
            .find(|e| e.message.starts_with("stopped at the first handshakes"))
            .unwrap_or_else(|| panic!("{what}: {:?}", r.errors));
        for words in ["not trusted", "--cacert", "--insecure", "UnknownIssuer"] {
            assert!(stop.message.contains(words), "{what}: {words:?} missing from {:?}", stop.message);
        }
    }
}

#[test]
fn open_loop_rate_is_accurate() {
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = Some(Dur(Duration::from_secs(5)));
            h.rate = Some(Rate(5000.0));
            h.connections = 20;
        }),
    );
    let h = http(&r);
    assert_eq!(h.mode, "open_loop");
    let target = h.target_rate.unwrap();
    assert!((target - 5000.0).abs() < 1.0, "target {target}");
    assert!((h.sent_per_s - 5000.0).abs() / 5000.0 <= 0.01, "achieved {} vs 5000/s", h.sent_per_s);
    assert!(h.completed as f64 >= h.sent as f64 * 0.99, "{} of {} answered", h.completed, h.sent);
    assert!(h.phases.send_lag.is_some());
}

#[test]
fn a_slow_open_loop_with_idle_connections_sends_nothing_late() {
    // Found in a run: 50/s over 50 idle connections reported "1 sent late (no free
    // connection)": the first request was due before any connection had said it was free.
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = Some(Dur(Duration::from_secs(2)));
            h.rate = Some(Rate(50.0));
            h.connections = 50;
        }),
    );
    let h = http(&r);
    assert!(h.sent >= 99, "{} sent", h.sent);
    assert_eq!(h.late, 0, "{} of {} sent late with {} connections", h.late, h.sent, h.connections.configured);
}

#[test]
fn a_20ms_delay_shows_up_as_20ms() {
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = Some(Dur(Duration::from_secs(3)));
            h.urls = vec!["/?delay=20ms".into()];
            h.rate = Some(Rate(200.0));
            h.connections = 20;
        }),
    );
    let p50 = http(&r).latency.p50_ns as f64 / 1e6;
    assert!((20.0..=22.0).contains(&p50), "p50 {p50} ms");
}

#[test]
fn a_stalled_server_raises_open_loop_latency_by_the_stall() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let cfg = netblast_agent::http::ResponderConfig::default();
    let pause = cfg.pause.clone();
    util::lane();
    let bg = netblast_agent::Background::http(listener, None, cfg, 2).unwrap();
    let addr = bg.addr();
    // One and a half seconds into a 4 s open-loop run, the responder stalls for 1 s.
    let pauser = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        pause.hold(Duration::from_secs(1));
    });
    let r = util::run(
        addr,
        profile(|p, h| {
            p.run.duration = Some(Dur(Duration::from_secs(4)));
            h.rate = Some(Rate(500.0));
            h.connections = 50;
        }),
    );
    pauser.join().unwrap();
    let h = http(&r);
    let p99 = h.latency.p99_ns as f64 / 1e9;
    let p50 = h.latency.p50_ns as f64 / 1e9;
    assert!(p50 < 0.05, "most requests are fast: p50 {p50} s");
    assert!((0.7..=1.5).contains(&p99), "p99 {p99} s should be about the 1 s stall");
    assert!(h.late > 0, "requests waited for a free connection during the stall");
}

#[test]
fn there_is_no_control_path_over_http() {
    let srv = Responder::start(false);
    let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
    use std::io::{Read, Write};
    s.write_all(b"GET /_netblast/pause?for=10s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    // An ordinary response: the path means nothing, and nothing stalls.
    let t = std::time::Instant::now();
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(100);
        }),
    );
    assert!(http(&r).latency.max_ns < 1_000_000_000 && t.elapsed() < Duration::from_secs(5));
}

#[test]
fn a_server_closing_mid_response_gives_counted_errors() {
    let srv = Responder::start(false);
    let r = util::run(
        srv.addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(100);
            h.urls = vec!["/?abort=1&size=100000".into()];
        }),
    );
    let h = all_failed(&r);
    assert_eq!(h.sent, 100);
    assert_eq!(h.completed, 0);
    let errors: u64 = h.errors.iter().map(|e| e.count).sum();
    assert_eq!(errors, 100, "{:?}", h.errors);
    assert!(h.errors.iter().any(|e| e.kind == "reset"), "{:?}", h.errors);
}

#[test]
fn refused_connections_are_counted_not_hung() {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let r = util::run(
        addr,
        profile(|p, h| {
            p.run.duration = Some(Dur(Duration::from_millis(500)));
            h.connections = 2;
        }),
    );
    let h = all_failed(&r);
    assert_eq!(h.completed, 0);
    assert!(h.errors.iter().any(|e| e.kind == "refused" && e.count > 0), "{:?}", h.errors);
    assert_eq!(h.connections.established, 0);
}

#[test]
fn against_nginx_counts_statuses_and_speaks_https_and_h2() {
    let Some(nginx) = util::nginx_limited("2000r/s") else { return };
    let (http_port, https_port) = (nginx.http, nginx.https);
    let addr: SocketAddr = format!("127.0.0.1:{http_port}").parse().unwrap();
    let r = util::run(
        addr,
        profile(|p, h| {
            p.run.duration = None;
            h.requests = Some(1000);
            h.urls = vec!["/".into(), "/503".into(), "/1mib".into()];
        }),
    );
    let h = http(&r);
    assert_eq!(h.completed, 1000);
    assert_eq!(status(&r, "200"), 667);
    assert_eq!(status(&r, "503"), 333);
    assert!(h.bytes_received > 333 * 1_048_576, "the 1 MiB file was read: {}", h.bytes_received);
    let tls_addr: SocketAddr = format!("127.0.0.1:{https_port}").parse().unwrap();
    for version in [HttpVersion::Http1, HttpVersion::Http2] {
        let r = util::run(
            tls_addr,
            profile(|p, h| {
                p.run.duration = None;
                h.requests = Some(500);
                h.tls = true;
                h.insecure = true;
                h.version = version;
            }),
        );
        assert_eq!(status(&r, "200"), 500, "{version:?}: {:?}", http(&r).errors);
    }
}

/// One plain HTTP/1.1 GET of `/?query`: its status and body length, or `None` when the
/// connection was closed without a response.
fn get(addr: std::net::SocketAddr, query: &str) -> Option<(u16, usize)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let _ = s.write_all(format!("GET /?{query} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes());
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = got.len() - text.find("\r\n\r\n")? - 4;
    Some((status, body))
}

#[test]
fn bodiless_statuses_carry_no_length_and_no_body() {
    // Found in the audit: `?status=204` and `304` answered with `content-length: 100`.
    use std::io::{Read, Write};
    let srv = Responder::start(false);
    for code in [204u16, 304] {
        let mut s = std::net::TcpStream::connect(srv.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(
            format!("GET /?status={code}&size=100 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").as_bytes(),
        )
        .unwrap();
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got).to_ascii_lowercase();
        assert!(text.starts_with(&format!("http/1.1 {code}")), "{text}");
        let length = text.lines().find(|l| l.starts_with("content-length:"));
        assert!(length.is_none_or(|l| l.trim().ends_with(" 0")), "{code}: {text}");
        assert!(text.ends_with("\r\n\r\n"), "{code}: a body after the head: {text}");
    }
}

#[test]
fn the_responder_answers_the_peers_serve_would_take_and_caps_what_they_ask() {
    use netblast_agent::http::{Peers, ResponderConfig};
    let metrics = netblast_agent::metrics::ServeMetrics::default();
    let start = |peers: Peers| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let cfg = ResponderConfig { peers, metrics: Some(metrics.clone()), ..Default::default() };
        util::lane();
        netblast_agent::Background::http(listener, None, cfg, 1).unwrap()
    };
    // Loopback, as a serve without a token: answered, bodies up to the 64 MiB default.
    let open = start(Peers::Loopback);
    assert_eq!(get(open.addr(), ""), Some((200, 45)));
    assert_eq!(get(open.addr(), "size=1MiB"), Some((200, 1 << 20)));
    let (status, _) = get(open.addr(), "size=1GiB").unwrap();
    assert_eq!(status, 400, "found: a stranger got a 1 GiB body");
    // A peer outside the allowed networks (this test's loopback is not in 10.99/16): closed
    // unanswered, and counted.
    let closed = start(Peers::Networks(vec!["10.99.0.0/16".parse().unwrap()]));
    assert_eq!(get(closed.addr(), "size=1MiB"), None);
    let refused =
        metrics.refused.get_or_create(&netblast_agent::metrics::label("reason", "http_peer_not_allowed")).get();
    assert_eq!(refused, 1);
    let text = netblast_metrics::encode(&metrics.registry());
    assert!(text.contains("netblast_serve_refused_total{reason=\"http_peer_not_allowed\"} 1"), "{text}");
}

#[test]
fn curl_from_another_namespace_is_served_only_as_serve_would_take_its_peer() {
    if !util::netns_or_skip("curl_from_another_namespace_is_served_only_as_serve_would_take_its_peer") {
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let serve = |extra: &[&str]| {
        let s = ns.serve_quiet(&ns.b, &[&["--port", "0", "--http", "18080"], extra].concat());
        std::thread::sleep(Duration::from_millis(400));
        s
    };
    // curl as a user runs it: (exit status, HTTP status, body).
    let curl = |from: &str, url: &str| {
        let o = ns
            .cmd(from, "curl")
            .args(["-sS", "--max-time", "5", "-o", "-", "-w", "\n%{http_code}", url])
            .output()
            .unwrap();
        // The body's bytes, then the status line -w appends.
        let cut = o.stdout.iter().rposition(|&b| b == b'\n').unwrap_or(0);
        let code = String::from_utf8_lossy(&o.stdout[cut..]).trim().to_string();
        (o.status.code(), code, o.stdout[..cut].to_vec())
    };
    let remote = format!("http://{}:18080", ns.addr_b);
    {
        let _s = serve(&[]);
        let (rc, code, body) = curl(&ns.a, &format!("{remote}/?size=1024"));
        assert!(rc != Some(0) && body.is_empty(), "a default serve answered another namespace: {rc:?} {code} {body:?}");
        let (rc, code, body) = curl(&ns.b, "http://127.0.0.1:18080/?size=1024");
        assert_eq!((rc, code.as_str(), body.len()), (Some(0), "200", 1024), "loopback is served");
    }
    std::thread::sleep(Duration::from_millis(200));
    {
        let tok = util::token_file("http-netns", "a-token-for-the-responder");
        let _s = serve(&["--token-file", tok.to_str().unwrap()]);
        let (rc, code, _) = curl(&ns.a, &format!("{remote}/?size=16"));
        assert_eq!((rc, code.as_str()), (Some(0), "200"), "with a token, its own interfaces' networks are served");
        let _ = std::fs::remove_file(tok);
    }
    std::thread::sleep(Duration::from_millis(200));
    let _s = serve(&["--open"]);
    let (rc, code, body) = curl(&ns.a, &format!("{remote}/?size=1024"));
    assert_eq!((rc, code.as_str(), body.len()), (Some(0), "200", 1024), "--open serves anyone");
    let (_, code, body) = curl(&ns.a, &format!("{remote}/?size=2GiB"));
    assert_eq!(code, "400", "{}", String::from_utf8_lossy(&body));
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("--http-max-body"), "the cap is named: {body}");
}

#[test]
fn a_response_slower_than_the_timeout_fails_as_a_timeout_and_the_next_gets_its_own_limit() {
    // Each lane keeps one timer for its life and moves it forward per request: a request
    // slower than the limit fails as a timeout, a faster one after it is not cut short by the
    // earlier deadline. Two URLs in turn on each lane: 300 ms (over the 150 ms limit) and
    // 100 ms (under it, and longer than what is left of a limit set at the previous request),
    // on one lane so that it takes them in turn.
    let srv = Responder::start(false);
    for (version, open_loop) in [(HttpVersion::Http1, false), (HttpVersion::Http1, true), (HttpVersion::Http2, false)] {
        let r = util::run(
            srv.addr,
            profile(|p, h| {
                p.run.duration = Some(Dur(Duration::from_secs(2)));
                h.urls = vec!["/?delay=300ms".into(), "/?delay=100ms".into()];
                h.timeout = Some(Dur(Duration::from_millis(150)));
                h.version = version;
                h.connections = 1;
                h.streams = 1;
                if open_loop {
                    // Slower than one 300 ms timeout and one 100 ms answer: no request waits
                    // for the lane, so latency from the intended time is the exchange's.
                    h.rate = Some(Rate(2.0));
                }
            }),
        );
        let what = format!("{version:?}, open loop {open_loop}");
        let h = r.summary.http.as_ref().expect("http summary");
        let timeouts = h.errors.iter().find(|e| e.kind == "timeout").map(|e| e.count).unwrap_or(0);
        assert!(timeouts > 0, "{what}: the 300 ms requests time out: {:?}", h.errors);
        assert!(h.completed > 0 && status(&r, "200") == h.completed, "{what}: the 100 ms ones answer: {h:?}");
        assert!(h.latency.max_ns < 150_000_000, "{what}: nothing completes past the limit");
        assert!(h.latency.p50_ns >= 100_000_000, "{what}: the answered ones waited their 100 ms");
    }
}

#[test]
fn failed_answers_are_failures_in_every_place_and_fail_the_run() {
    // Found as a new user: half the answers 400, and the run exited 0 with "Errors 0" in every
    // interval and verdicts only about speed (a firewall refusing half would read as fast).
    let srv = Responder::start(false);
    let run = |urls: &[&str], extra: &[&str]| {
        let mut c = util::run_cmd();
        c.args(["--target", &srv.addr.to_string(), "--profile", "http-max", "-c", "4", "-t", "1", "-i", "0.5"]);
        for u in urls {
            c.args(["--url", &format!("http://{}{u}", srv.addr)]);
        }
        let o = c.args(extra).output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, text) = run(&["/", "/?status=400"], &[]);
    assert_eq!(code, Some(4), "more than 1% failed: exit 4 by default\n{text}");
    assert!(text.contains("http.failed<=1%") && text.contains("FAIL"), "{text}");
    let errors: Vec<u64> = text
        .lines()
        .filter(|l| l.starts_with("[SUM]"))
        .filter_map(|l| l.split_whitespace().rev().nth(1)?.parse().ok())
        .collect();
    assert!(!errors.is_empty() && errors.iter().all(|&e| e > 0), "every interval counts its 400s: {errors:?}\n{text}");
    assert!(text.contains("Succeeded:"), "{text}");
    let verdict = text.lines().find(|l| l.contains("HTTP:")).unwrap_or_default();
    assert!(verdict.starts_with("verdict: HTTP: requests failed (") && verdict.contains("[400]"), "{verdict}");
    // Round robin over the two URLs: about half.
    let share: f64 = verdict.split('%').next().and_then(|h| h.rsplit(' ').next()?.parse().ok()).unwrap();
    assert!((40.0..=60.0).contains(&share), "{verdict}");
    // The user who expects refusals says so.
    let (code, text) = run(&["/", "/?status=400"], &["--assert", "http.failed<=100%"]);
    assert_eq!(code, Some(0), "{text}");
    // Nothing succeeded: incomplete, and the verdict says nothing was measured.
    let (code, text) = run(&["/?status=503"], &[]);
    assert_eq!(code, Some(1), "{text}");
    let verdict = text.lines().find(|l| l.contains("HTTP:")).unwrap_or_default();
    assert!(verdict.contains("every request failed") && verdict.contains("[503]"), "{verdict}");
    assert!(!verdict.contains("is the limit"), "{verdict}");
}
