//! One client connection: TCP connect, TLS handshake, HTTP/1.1 or HTTP/2 handshake, each timed;
//! bytes counted at the TCP level (so TLS overhead is included).

use super::h1::{H1Conn, Io};
use super::stats::{ConnTcp, ErrorKind, Failure};
use bytes::Bytes;
use netblast_probe::{FlowWatch, Probe, tcpinfo};
use netblast_spec::profile::HttpVersion;
use rustls::pki_types::ServerName;
use std::cell::{Cell, RefCell};
use std::io;
use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Where one URL's requests go.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// Resolved address.
    pub addr: SocketAddr,
    /// TLS server name, for https.
    pub tls_name: Option<ServerName<'static>>,
    /// `host:port` as written, for the Host header and h2 `:authority`.
    pub authority: String,
    /// Where connections to it leave from.
    pub bind: crate::os::sockopt::Binding,
    /// The DSCP mark of what they send (`--dscp`).
    pub dscp: Option<netblast_spec::mark::Dscp>,
}

/// Bytes written and read by a worker's connections.
#[derive(Debug, Default)]
pub struct ByteCount {
    /// Written.
    pub sent: Cell<u64>,
    /// Read.
    pub received: Cell<u64>,
}

/// What a worker's connections report into: bytes as they move, kernel TCP statistics as
/// each connection closes.
#[derive(Debug, Clone)]
pub struct Meters {
    /// Bytes written and read.
    pub bytes: Rc<ByteCount>,
    /// Kernel TCP statistics of closed connections.
    pub tcp: Rc<RefCell<ConnTcp>>,
    /// Where kernel statistics come from.
    pub probe: Probe,
}

/// A TCP stream that counts the bytes through it and, when dropped, adds the socket's kernel
/// statistics to the worker's (before the descriptor closes, so it cannot be another socket's).
pub struct Counting {
    inner: TcpStream,
    count: Rc<ByteCount>,
    watch: Option<(FlowWatch, Rc<RefCell<ConnTcp>>)>,
}

impl Drop for Counting {
    fn drop(&mut self) {
        if let Some((watch, tcp)) = self.watch.take() {
            if let Some(info) = tcpinfo::read(self.inner.as_raw_fd()) {
                let mut t = tcp.borrow_mut();
                if let Err(e) = t.record(&info, watch.rtt_histogram().as_ref()) {
                    t.problem.get_or_insert(e.to_string());
                }
            }
        }
    }
}

impl AsyncRead for Counting {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = (buf.filled().len() - before) as u64;
        self.count.received.set(self.count.received.get() + n);
        r
    }
}

impl AsyncWrite for Counting {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            self.count.sent.set(self.count.sent.get() + *n as u64);
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            self.count.sent.set(self.count.sent.get() + *n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// A ready connection.
pub enum Sender {
    /// HTTP/1.1: one request at a time.
    H1(H1Conn),
    /// HTTP/2: a handle on the connection; each request opens a stream of its own.
    H2(h2::client::SendRequest<Bytes>),
}

impl Sender {
    /// Whether the connection can take another request.
    pub fn is_usable(&mut self) -> bool {
        match self {
            Sender::H1(s) => s.is_usable(),
            // The kept handle never opens a stream itself (each exchange uses a clone), so it
            // waits for none: this reports only whether the connection failed or was sent away.
            Sender::H2(s) => {
                !matches!(s.poll_ready(&mut Context::from_waker(std::task::Waker::noop())), Poll::Ready(Err(_)))
            }
        }
    }
}

/// How long opening a connection took.
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenTimes {
    /// TCP connect.
    pub connect: Duration,
    /// TLS handshake, for https.
    pub tls: Option<Duration>,
}

fn io_failure(e: &io::Error, what: &str) -> Failure {
    (ErrorKind::of_io(e), format!("{what}: {e}"))
}

/// A failed TLS handshake, classified: a certificate this client does not trust says which
/// flag changes that (every later handshake with that server would fail the same way).
fn tls_failure(e: &io::Error, authority: &str) -> Failure {
    let untrusted = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        .is_some_and(|r| matches!(r, rustls::Error::InvalidCertificate(_)));
    if untrusted {
        (
            ErrorKind::Certificate,
            format!(
                "TLS handshake with {authority}: {e}: the server's certificate is not trusted \
                 (--cacert FILE trusts its issuer, -k/--insecure skips the check)"
            ),
        )
    } else {
        (ErrorKind::Tls, format!("TLS handshake with {authority}: {e}"))
    }
}

/// A TCP connection to `ep`, from the plan's binding (`-B`, `--bind-dev`) if it has one, marked
/// with its DSCP (the SYN too) if it has one.
async fn connect_tcp(ep: &Endpoint) -> std::io::Result<TcpStream> {
    let (addr, local) = (ep.addr, &ep.bind);
    if local.is_empty() && ep.dscp.is_none() {
        return TcpStream::connect(addr).await;
    }
    let sock = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    sock.set_nonblocking(true)?;
    crate::os::sockopt::mark(socket2::SockRef::from(&sock), ep.dscp)?;
    crate::os::sockopt::bind_nth(&sock, local, crate::os::sockopt::next_socket())?;
    tokio::net::TcpSocket::from_std_stream(sock.into()).connect(addr).await
}

/// Opens a connection to `ep` and performs the HTTP handshake.
pub async fn open(
    ep: &Endpoint,
    version: HttpVersion,
    tls: Option<&Arc<rustls::ClientConfig>>,
    meters: &Meters,
) -> Result<(Sender, OpenTimes), Failure> {
    let t0 = Instant::now();
    let tcp = connect_tcp(ep).await.map_err(|e| {
        let (kind, msg) = io_failure(&e, &format!("connect to {}", ep.addr));
        (if kind == ErrorKind::Refused { kind } else { ErrorKind::Connect }, msg)
    })?;
    let _ = tcp.set_nodelay(true);
    let connect = t0.elapsed();
    let watch = meters.probe.collects().then(|| (meters.probe.watch(tcp.as_raw_fd()), meters.tcp.clone()));
    let io = Counting { inner: tcp, count: meters.bytes.clone(), watch };
    match (&ep.tls_name, tls) {
        (Some(name), Some(cfg)) => {
            let t1 = Instant::now();
            let stream = tokio_rustls::TlsConnector::from(cfg.clone())
                .connect(name.clone(), io)
                .await
                .map_err(|e| tls_failure(&e, &ep.authority))?;
            let tls_time = t1.elapsed();
            let alpn = stream.get_ref().1.alpn_protocol().map(|p| p.to_vec());
            if version == HttpVersion::Http2 && alpn.as_deref() != Some(b"h2") {
                return Err((ErrorKind::Tls, format!("{} did not negotiate HTTP/2 (ALPN h2)", ep.authority)));
            }
            let sender = handshake(Io::Tls(Box::new(stream)), version).await?;
            Ok((sender, OpenTimes { connect, tls: Some(tls_time) }))
        }
        _ => Ok((handshake(Io::Plain(io), version).await?, OpenTimes { connect, tls: None })),
    }
}

type Stream = Io<Counting, tokio_rustls::client::TlsStream<Counting>>;

/// The HTTP/2 settings of every connection: a 2 MiB stream window and a 5 MiB connection
/// window (responses of megabytes are not held back by the protocol's 64 KiB default), 16 KiB
/// frames, no server push (hyper's client defaults, which this client used before it spoke h2
/// itself).
fn h2_builder() -> h2::client::Builder {
    let mut b = h2::client::Builder::new();
    b.initial_window_size(2 << 20)
        .initial_connection_window_size(5 << 20)
        .max_frame_size(16 << 10)
        .max_header_list_size(16 << 10)
        .max_send_buffer_size(1 << 20)
        .initial_max_send_streams(100)
        .enable_push(false);
    b
}

async fn handshake(io: Stream, version: HttpVersion) -> Result<Sender, Failure> {
    match version {
        HttpVersion::Http1 => Ok(Sender::H1(H1Conn::new(Box::new(io)))),
        HttpVersion::Http2 => {
            let (sender, conn) = h2_builder()
                .handshake::<_, Bytes>(io)
                .await
                .map_err(|e| (ErrorKind::of_h2(&e), format!("HTTP/2 handshake: {e}")))?;
            tokio::task::spawn_local(async move {
                let _ = conn.await;
            });
            Ok(Sender::H2(sender))
        }
    }
}
