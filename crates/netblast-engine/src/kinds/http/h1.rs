//! The HTTP/1.1 client connection: the request pre-serialized once per URL and written with
//! one `write`, the response read straight off the socket and its head read in place
//! ([`super::head`]), the body framed by Content-Length, chunked encoding or the end of the
//! connection, and counted, not kept.
//!
//! Why not hyper's client here: hyper's dispatch hands every request and response between two
//! tasks through channels. On the 2-core box, with the client and nginx sharing the CPUs, that
//! per-request user-space cost went to the client instead of the server: measured, the hyper
//! client stayed at wrk's request rate or below, this one sends the same requests and measures
//! the same things for less CPU. HTTP/2 uses hyper.

use super::head;
use super::stats::{ErrorKind, Failure};
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};

/// Most bytes of response head accepted.
const MAX_HEAD: usize = 64 * 1024;
/// Initial read buffer: small, so thousands of connections stay cheap (16 KiB each).
const BUF: usize = 16 * 1024;
/// A connection skipping a large body grows its buffer up to this, for fewer reads.
const BIG_BUF: usize = 256 * 1024;

/// A byte stream to the server: plain or TLS.
pub trait Stream: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Stream for T {}

/// One HTTP/1.1 connection.
pub struct H1Conn {
    io: Box<dyn Stream>,
    buf: Vec<u8>,
    /// Unconsumed bytes are `buf[start..end]`.
    start: usize,
    end: usize,
    closed: bool,
}

/// What a response was.
#[derive(Debug, Clone, Copy)]
pub struct Answer {
    /// Status code.
    pub status: u16,
    /// When the response head was complete.
    pub head_at: Instant,
}

fn proto(msg: impl Into<String>) -> Failure {
    (ErrorKind::Protocol, msg.into())
}

fn io_fail(e: io::Error, what: &str) -> Failure {
    (ErrorKind::of_io(&e), format!("{what}: {e}"))
}

enum Framing {
    Length(u64),
    Chunked,
    UntilClose,
    None,
}

impl H1Conn {
    /// Wraps a connected stream.
    pub fn new(io: Box<dyn Stream>) -> H1Conn {
        H1Conn { io, buf: vec![0u8; BUF], start: 0, end: 0, closed: false }
    }

    /// Whether another request may be sent on this connection.
    pub fn is_usable(&self) -> bool {
        !self.closed
    }

    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Reads more bytes into the buffer (compacting or growing it); `Ok(0)` at end of file.
    async fn fill(&mut self) -> io::Result<usize> {
        if self.start > 0 && (self.end == self.buf.len() || self.start == self.end) {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.buf.len() {
            self.buf.resize(self.buf.len() * 2, 0);
        }
        let n = self.io.read(&mut self.buf[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    /// Sends one request and reads the whole response. `head_request`: the request was HEAD
    /// (no body follows whatever the headers say).
    pub async fn exchange(&mut self, request: &[u8], head_request: bool) -> Result<Answer, Failure> {
        self.closed = true; // until the response proves the connection reusable
        if let Err(e) = self.io.write_all(request).await {
            return Err(io_fail(e, "sending the request"));
        }
        // Response head (skipping 1xx interim responses).
        let (status, framing, keep_alive, head_at) = loop {
            match head::parse(self.pending()) {
                Ok(Some(h)) => {
                    self.start += h.len;
                    if (100..200).contains(&h.status) && h.status != 101 {
                        continue; // interim response; the real one follows
                    }
                    let framing = if head_request || h.status == 204 || h.status == 304 {
                        Framing::None
                    } else if h.chunked {
                        Framing::Chunked
                    } else {
                        h.length.map_or(Framing::UntilClose, Framing::Length)
                    };
                    break (h.status, framing, !h.close, Instant::now());
                }
                Ok(None) => {
                    if self.pending().len() > MAX_HEAD {
                        return Err(proto("response head over 64 KiB"));
                    }
                    match self.fill().await {
                        Ok(0) => {
                            return Err((ErrorKind::Reset, "the server closed the connection before answering".into()));
                        }
                        Ok(_) => {}
                        Err(e) => return Err(io_fail(e, "reading the response")),
                    }
                }
                Err(why) => return Err(proto(format!("malformed response head: {why}"))),
            }
        };
        let reusable = match framing {
            Framing::None => true,
            Framing::Length(n) => {
                self.skip(n).await?;
                true
            }
            Framing::Chunked => {
                self.skip_chunked().await?;
                true
            }
            Framing::UntilClose => {
                loop {
                    self.start = self.end;
                    match self.fill().await {
                        Ok(0) => break,
                        Ok(_) => {}
                        Err(e) => return Err(io_fail(e, "reading the response body")),
                    }
                }
                false
            }
        };
        self.closed = !(reusable && keep_alive);
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        Ok(Answer { status, head_at })
    }

    /// Consumes `n` body bytes.
    async fn skip(&mut self, mut n: u64) -> Result<(), Failure> {
        if n > (4 * self.buf.len()) as u64 && self.buf.len() < BIG_BUF {
            self.buf.resize(BIG_BUF, 0);
        }
        loop {
            let have = self.pending().len() as u64;
            let take = have.min(n);
            self.start += take as usize;
            n -= take;
            if n == 0 {
                return Ok(());
            }
            match self.fill().await {
                Ok(0) => {
                    return Err((ErrorKind::Reset, format!("connection closed with {n} bytes of the body missing")));
                }
                Ok(_) => {}
                Err(e) => return Err(io_fail(e, "reading the response body")),
            }
        }
    }

    /// Reads one CRLF-terminated line (without the CRLF).
    async fn line(&mut self) -> Result<Vec<u8>, Failure> {
        loop {
            if let Some(i) = self.pending().windows(2).position(|w| w == b"\r\n") {
                let l = self.pending()[..i].to_vec();
                self.start += i + 2;
                return Ok(l);
            }
            if self.pending().len() > MAX_HEAD {
                return Err(proto("chunk header over 64 KiB"));
            }
            match self.fill().await {
                Ok(0) => return Err((ErrorKind::Reset, "connection closed inside a chunked body".into())),
                Ok(_) => {}
                Err(e) => return Err(io_fail(e, "reading the response body")),
            }
        }
    }

    /// Consumes a chunked body, trailers included.
    async fn skip_chunked(&mut self) -> Result<(), Failure> {
        loop {
            let l = self.line().await?;
            let hex = l.split(|b| *b == b';').next().unwrap_or(&[]);
            let size = std::str::from_utf8(hex)
                .ok()
                .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
                .ok_or_else(|| proto("invalid chunk size"))?;
            if size == 0 {
                // Trailers, up to the empty line.
                while !self.line().await?.is_empty() {}
                return Ok(());
            }
            self.skip(size).await?;
            if !self.line().await?.is_empty() {
                return Err(proto("chunk not followed by CRLF"));
            }
        }
    }
}

/// A TCP or TLS stream behind one type.
pub enum Io<P, T> {
    /// Plain TCP.
    Plain(P),
    /// TLS.
    Tls(Box<T>),
}

impl<P: AsyncRead + Unpin, T: AsyncRead + Unpin> AsyncRead for Io<P, T> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(p) => Pin::new(p).poll_read(cx, buf),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_read(cx, buf),
        }
    }
}

impl<P: AsyncWrite + Unpin, T: AsyncWrite + Unpin> AsyncWrite for Io<P, T> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(p) => Pin::new(p).poll_write(cx, buf),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(p) => Pin::new(p).poll_flush(cx),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(p) => Pin::new(p).poll_shutdown(cx),
            Io::Tls(t) => Pin::new(t.as_mut()).poll_shutdown(cx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `replies` (raw bytes) on a loopback socket, one per request read.
    async fn conn_with(replies: Vec<&'static [u8]>) -> H1Conn {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            for r in replies {
                let _ = s.read(&mut buf).await;
                s.write_all(r).await.unwrap();
            }
            // Keep the connection open briefly; a close-delimited reply closes by returning.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        });
        let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
        H1Conn::new(Box::new(tcp))
    }

    #[tokio::test(flavor = "current_thread")]
    async fn content_length_and_chunked_and_interim() {
        let mut c = conn_with(vec![
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 503 Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n4;x=y\r\ndefg\r\n0\r\nX-T: 1\r\n\r\n",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ])
        .await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 200);
        assert!(c.is_usable());
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 503);
        assert!(c.is_usable());
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 204);
        assert!(c.is_usable());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn truncated_body_is_a_reset_and_close_ends_reuse() {
        let mut c = conn_with(vec![b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"]).await;
        let e = c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap_err();
        assert_eq!(e.0, ErrorKind::Reset, "{e:?}");
        assert!(!c.is_usable());
        let mut c = conn_with(vec![b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 200);
        assert!(!c.is_usable());
        let mut c = conn_with(vec![b"HTTP/1.1 200 OK\r\n\r\nuntil the end"]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 200);
        assert!(!c.is_usable(), "a close-delimited body ends the connection");
        let mut c = conn_with(vec![b"SSH-2.0-OpenSSH\r\n\r\n"]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap_err().0, ErrorKind::Protocol);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn header_names_and_tokens_match_in_any_case() {
        // Upper-case tokens end reuse, or keep an HTTP/1.0 connection, as lower-case ones do.
        let mut c = conn_with(vec![b"HTTP/1.1 200 OK\r\nCONNECTION: Close\r\ncontent-length: 2\r\n\r\nok"]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 200);
        assert!(!c.is_usable());
        let mut c = conn_with(vec![b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 2\r\n\r\nok"]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap().status, 200);
        assert!(c.is_usable());
        // More headers than the 64 parsed: a protocol error, not a panic.
        let mut many = String::from("HTTP/1.1 200 OK\r\n");
        for i in 0..70 {
            many.push_str(&format!("X-{i}: v\r\n"));
        }
        many.push_str("Content-Length: 0\r\n\r\n");
        let mut c = conn_with(vec![Box::leak(many.into_bytes().into_boxed_slice())]).await;
        assert_eq!(c.exchange(b"GET / HTTP/1.1\r\n\r\n", false).await.unwrap_err().0, ErrorKind::Protocol);
    }
}
