//! A cps connection to a server that is not netblast (a web server, a load balancer's address,
//! a firewall in front of a server): after `connect`, a TLS handshake when asked (full, or
//! resumed from the flow's session cache), the bytes `cps.send` holds, what `cps.read` asks of
//! the answer, then the close. What the first bytes of the answer were (nothing, an HTTP
//! response, anything else: a banner) and how each handshake went (full or resumed, the
//! version and cipher) are counted in the flow's [`ConnCounts`].

use netblast_spec::profile::{CpsSection, ReadMode};
use netblast_spec::result::{Answers, ConnCounts, TlsCounts};
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use socket2::Socket;
use std::io::{self, ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

/// Most bytes of an answer read with `read = "all"` before the connection counts as failed:
/// a server that streams forever is not answering a connection test.
const MAX_ANSWER: u64 = 64 << 20;

/// What every connection of an agentless cps test does, set up once.
#[derive(Debug)]
pub struct Agentless {
    /// Sent once the connection is up (and its handshake done).
    pub send: Vec<u8>,
    /// What is read before the close.
    pub read: ReadMode,
    /// The TLS configuration and server name, with TLS.
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    /// The server sent TLS 1.3 session tickets after a handshake: from then on each
    /// connection waits for them longer (up to a second).
    pub tickets_seen: std::sync::atomic::AtomicBool,
}

impl Agentless {
    /// The exchange of a `[cps]` section with no agent, its target's host (as
    /// `plan::split_host_port` reads it) for the server name.
    pub fn new(c: &CpsSection, to: SocketAddr, host: &str) -> Result<Agentless, String> {
        let send = c.send_bytes().map_err(|e| format!("cps.send: {e}"))?;
        let tls = if c.tls {
            let name = c.sni.clone().unwrap_or_else(|| host.to_string());
            let name = if name.is_empty() { to.ip().to_string() } else { name };
            let server = ServerName::try_from(name.clone()).map_err(|_| format!("invalid TLS server name {name:?}"))?;
            Some((config(c)?, server))
        } else {
            None
        };
        Ok(Agentless { send, read: c.read_mode(), tls, tickets_seen: Default::default() })
    }
}

/// The client TLS configuration of a cps section: its trust, its version, and session
/// resumption (an in-memory cache per configuration, shared by the flows) or none.
fn config(c: &CpsSection) -> Result<Arc<ClientConfig>, String> {
    let trust = crate::kinds::http::tls::Trust { insecure: c.insecure, cacert: c.cacert.as_deref() };
    let versions: &[&rustls::SupportedProtocolVersion] = match c.tls_version {
        None => rustls::DEFAULT_VERSIONS,
        Some(netblast_spec::profile::TlsVersion::Tls12) => &[&rustls::version::TLS12],
        Some(netblast_spec::profile::TlsVersion::Tls13) => &[&rustls::version::TLS13],
    };
    let mut config = crate::kinds::http::tls::build(trust, versions)?;
    config.resumption = if c.resume {
        rustls::client::Resumption::in_memory_sessions(1024)
    } else {
        rustls::client::Resumption::disabled()
    };
    Ok(Arc::new(config))
}

/// Why an exchange failed: the TLS protocol (a certificate refused, an alert), or the socket
/// (which counts by cause).
#[derive(Debug)]
pub enum Failed {
    /// What rustls refused.
    Tls(String),
    /// The socket's error.
    Io(io::Error),
}

/// Runs one connected socket's exchange; returns when its timed part (`connect`, or the TLS
/// handshake) ended.
pub fn exchange(
    sock: &Socket,
    a: &Agentless,
    counts: &mut ConnCounts,
    scratch: &mut [u8],
    (t0, deadline): (Instant, Instant),
) -> Result<Instant, Failed> {
    match &a.tls {
        None => {
            let timed_to = Instant::now();
            let mut s = sock;
            if !a.send.is_empty() {
                s.write_all(&a.send).map_err(Failed::Io)?;
            }
            let answer = read_answer(&mut s, a.read, scratch, deadline).map_err(Failed::Io)?;
            counts.answers.get_or_insert_with(Answers::default).add(&answer);
            Ok(timed_to)
        }
        Some((config, name)) => {
            let mut conn = rustls::ClientConnection::new(config.clone(), name.clone())
                .map_err(|e| Failed::Tls(format!("cannot start a TLS handshake: {e}")))?;
            let mut s = sock;
            while conn.is_handshaking() {
                conn.complete_io(&mut s).map_err(tls_error)?;
            }
            let timed_to = Instant::now();
            let tls = TlsCounts {
                full: u64::from(conn.handshake_kind() != Some(rustls::HandshakeKind::Resumed)),
                resumed: u64::from(conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)),
                version: conn.protocol_version().map(u16::from).unwrap_or(0),
                cipher: conn.negotiated_cipher_suite().map(|c| u16::from(c.suite())).unwrap_or(0),
            };
            counts.tls.get_or_insert_with(TlsCounts::default).add(&tls);
            if conn.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3) {
                take_tickets(&mut conn, sock, timed_to.saturating_duration_since(t0), &a.tickets_seen);
            }
            let mut stream = rustls::Stream::new(&mut conn, &mut s);
            if !a.send.is_empty() {
                stream.write_all(&a.send).map_err(tls_error)?;
                stream.flush().map_err(tls_error)?;
            }
            let answer = read_answer(&mut stream, a.read, scratch, deadline).map_err(tls_error)?;
            counts.answers.get_or_insert_with(Answers::default).add(&answer);
            // The orderly end of the session before the socket's close.
            conn.send_close_notify();
            let _ = conn.write_tls(&mut s);
            Ok(timed_to)
        }
    }
}

/// TLS 1.3 servers send their session tickets after the handshake: reads them, as a client
/// that resumes needs, and so that the close finds nothing unread (which would make it a
/// reset). Until a server is seen to send tickets each connection waits for them as long as
/// its handshake took (about a round trip: a server that sends none costs that, outside the
/// timed handshake); once it has, up to a second (a busy server sends them late).
fn take_tickets(
    conn: &mut rustls::ClientConnection,
    sock: &Socket,
    handshake: std::time::Duration,
    seen: &std::sync::atomic::AtomicBool,
) {
    use std::os::fd::AsRawFd;
    use std::sync::atomic::Ordering;
    let ms = if seen.load(Ordering::Relaxed) { 1000 } else { handshake.as_millis().clamp(1, 1000) as i32 };
    let mut pfd = libc::pollfd { fd: sock.as_raw_fd(), events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd for the duration of the call.
    if unsafe { libc::poll(&mut pfd, 1, ms) } == 1 {
        let mut s = sock;
        if conn.read_tls(&mut s).is_ok() && conn.process_new_packets().is_ok() {
            seen.store(true, Ordering::Relaxed);
        }
    }
}

/// A socket error stays one (it counts by cause); anything rustls refused is a TLS failure.
fn tls_error(e: io::Error) -> Failed {
    if e.raw_os_error().is_none() && e.kind() == ErrorKind::InvalidData {
        Failed::Tls(e.to_string())
    } else {
        Failed::Io(e)
    }
}

/// Reads what `mode` asks for and says what it was. A server that closes the TLS session
/// without its close_notify has still closed: the end of the answer.
fn read_answer(r: &mut impl Read, mode: ReadMode, scratch: &mut [u8], deadline: Instant) -> io::Result<Answers> {
    let mut a = Answers::default();
    let mut head = [0u8; 12];
    let mut have = 0usize;
    if mode == ReadMode::None {
        a.nothing = 1;
        return Ok(a);
    }
    loop {
        let n = match r.read(scratch) {
            Ok(n) => n,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => 0,
            // SO_RCVTIMEO ran out: the connection's timeout.
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT)),
            Err(e) => return Err(e),
        };
        let take = n.min(head.len() - have);
        head[have..have + take].copy_from_slice(&scratch[..take]);
        have += take;
        a.bytes += n as u64;
        let done = n == 0 || mode == ReadMode::First;
        if !done && (a.bytes > MAX_ANSWER || Instant::now() >= deadline) {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        if done {
            break;
        }
    }
    classify(&head[..have], &mut a);
    Ok(a)
}

/// Counts an answer by its first bytes: none, an HTTP response (with its status), other.
fn classify(head: &[u8], a: &mut Answers) {
    if head.is_empty() {
        a.nothing = 1;
    } else if head.starts_with(b"HTTP/") {
        a.http = 1;
        a.http_status =
            head.get(9..12).and_then(|d| std::str::from_utf8(d).ok()).and_then(|d| d.parse::<u16>().ok()).unwrap_or(0);
    } else {
        a.banner = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_named_by_their_first_bytes() {
        let one = |head: &[u8]| {
            let mut a = Answers::default();
            classify(head, &mut a);
            a
        };
        assert_eq!(one(b"").nothing, 1);
        let h = one(b"HTTP/1.1 404");
        assert_eq!((h.http, h.http_status), (1, 404));
        assert_eq!(one(b"HTTP/1.1").http_status, 0, "a status not read yet is unknown, not 0 guessed");
        assert_eq!(one(b"SSH-2.0-Open").banner, 1);
    }

    #[test]
    fn reading_stops_where_the_mode_says() {
        let far = Instant::now() + std::time::Duration::from_secs(5);
        let mut scratch = [0u8; 4];
        let mut all: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nhello";
        let a = read_answer(&mut all, ReadMode::All, &mut scratch, far).unwrap();
        assert_eq!((a.http, a.http_status, a.bytes), (1, 200, 24), "the head gathers over 4-byte reads");
        let mut scratch = [0u8; 64];
        let mut first: &[u8] = b"HTTP/1.0 200 OK\r\n\r\nhello";
        let a = read_answer(&mut first, ReadMode::First, &mut scratch, far).unwrap();
        assert_eq!((a.http_status, a.bytes), (200, 24));
        let mut none: &[u8] = b"ignored";
        assert_eq!(read_answer(&mut none, ReadMode::None, &mut scratch, far).unwrap().nothing, 1);
    }
}
