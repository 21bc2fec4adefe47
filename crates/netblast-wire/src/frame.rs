//! Control frames: length-prefixed JSON messages between client, server, agents and
//! coordinator, their encoding, and reading them over blocking and tokio streams.

use crate::header::MAX_FRAME;
use netblast_spec::profile::{Profile, Way};
use netblast_spec::result::{CpuUsage, HostInfo, HostLoad, ProbeInfo, TcpStats};
use netblast_spec::units::Dur;
use serde::{Deserialize, Serialize};

/// Why a peer was refused, as carried in a `refused` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Refusal {
    /// No common protocol version.
    Version,
    /// Missing or wrong token.
    Auth,
    /// The peer's address is not allowed (a server without a token takes loopback only).
    NotAllowed,
    /// A limit of the server (tests, streams, descriptors, memory).
    Limit,
    /// The request itself is invalid.
    Invalid,
    /// The server is shutting down.
    Shutdown,
    /// The server holds as many connections that have not proven themselves as it may, and
    /// closed this one, the oldest, to admit a newer one: dial again.
    Busy,
}

impl Refusal {
    /// The reason in words, for logs a person reads.
    pub fn words(self) -> &'static str {
        match self {
            Refusal::Version => "no common protocol version",
            Refusal::Auth => "missing or wrong token",
            Refusal::NotAllowed => "address not allowed",
            Refusal::Limit => "a server limit",
            Refusal::Invalid => "invalid request",
            Refusal::Shutdown => "shutting down",
            Refusal::Busy => "at its limit of unproven connections",
        }
    }
}

/// A `refused` frame.
pub fn refusal(reason: Refusal, message: String) -> Vec<u8> {
    encode_frame(&ServerMsg::Refused { message, reason: Some(reason) })
}

/// One stream the client will open (a plan's; defined with the plan).
pub use netblast_spec::plan::StreamSetup;

/// What the client asks the server to host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestSetup {
    /// Client version, for messages.
    pub client_version: String,
    /// The validated profile (the server takes its parameters from it).
    pub profile: Profile,
    /// The time bound in effect; the server stops by itself shortly after it.
    pub time_bound: Dur,
    /// The streams the client will open.
    pub streams: Vec<StreamSetup>,
    /// The client's kernel (its boot id): a server that reads the same one shares the
    /// client's CPUs, whatever address it was reached at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<String>,
}

/// Frames from client to server on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Set up a test (first frame).
    Setup(Box<TestSetup>),
    /// All streams are connected: start now.
    Start,
    /// The client's bound is reached: server senders stop.
    Stop,
}

/// The server's view of one stream during one interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerSample {
    /// Stream id.
    pub id: u32,
    /// Bytes the server sent or received on it in the interval.
    pub bytes: u64,
    /// Messages the server received or answered in the interval (message kinds).
    #[serde(default)]
    pub msgs: u64,
    /// Server-side TCP statistics (present where the server sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// UDP: what the server's receiver saw of the stream's sequenced datagrams.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<netblast_spec::result::UdpQuality>,
}

/// The server's view of one way during one interval, summed over its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerWaySample {
    /// Which way.
    pub way: Way,
    /// Bytes the server sent or received on the way's streams.
    pub bytes: u64,
    /// Messages the server received or answered (message kinds).
    #[serde(default)]
    pub msgs: u64,
    /// Segments the server retransmitted (where it sends).
    #[serde(default)]
    pub retransmits: u64,
    /// Segments the server sent (where it sends, message kinds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segs_out: Option<u64>,
}

/// The server's totals for one stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerStreamFinal {
    /// Stream id.
    pub id: u32,
    /// Bytes sent or received in total.
    pub bytes: u64,
    /// Messages received or answered in total (message kinds).
    #[serde(default)]
    pub msgs: u64,
    /// Seconds from the server's start to its last byte.
    pub seconds: f64,
    /// Server-side TCP statistics at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp: Option<TcpStats>,
    /// CPU the stream's server worker was pinned to (read back from its affinity).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// The kernel's RTT histogram of the server's socket (eBPF probe, server sends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rtt_hist: Option<netblast_spec::hist::EncodedHistogram>,
    /// `TCP_INFO` of the server's socket at the end, when its statistics came from eBPF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<TcpStats>,
    /// Datagrams the kernel dropped at the server's receiving UDP socket (queue full).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel_drops: Option<u64>,
    /// Why the server could not do what was asked (e.g. pin to a CPU it does not have).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Error that ended the stream early, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// UDP: what the server's receiver saw of the stream's sequenced datagrams, in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<netblast_spec::result::UdpQuality>,
    /// UDP: the server's receive queue for the stream, in bytes, as its kernel applied it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rcvbuf: Option<u64>,
}

/// Frames from server to client on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerMsg {
    /// The setup is accepted: streams may connect.
    Accepted {
        /// The server host.
        server: HostInfo,
        /// Where the server's TCP statistics come from.
        probe: ProbeInfo,
    },
    /// The setup (or the connection) is refused.
    Refused {
        /// Why, in words.
        message: String,
        /// Why, as a class (absent from version 1 peers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Refusal>,
    },
    /// The server's counters for one interval.
    Interval {
        /// 0-based interval index on the server's clock.
        index: u32,
        /// Start, seconds since the server saw `Start`.
        start_s: f64,
        /// End, seconds since the server saw `Start`.
        end_s: f64,
        /// Per stream (tests of at most [`netblast_spec::result::MAX_STREAM_DETAIL`] streams).
        streams: Vec<ServerSample>,
        /// Per way, summed over the streams (larger tests, instead of `streams`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        ways: Vec<ServerWaySample>,
    },
    /// The server's totals; the last frame of a test.
    Final {
        /// Per stream.
        streams: Vec<ServerStreamFinal>,
        /// CPU used by the server threads that carried this test.
        cpu: CpuUsage,
        /// When the server read kernel statistics of only some flows at each tick (too many
        /// for its per-tick budget), what it read: `[read, wanted]` flow-ticks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tcp_samples: Option<[u64; 2]>,
        /// The server host's CPUs and drops over the test (absent from older servers).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        load: Option<HostLoad>,
        /// The server's own lines about the test, as `netblast serve` prints them (what
        /// `run --get-server-output` shows; absent from older servers).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        output: Vec<String>,
    },
}

/// Why a frame could not be read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The length prefix is over [`MAX_FRAME`].
    #[error("control frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLong(usize),
    /// The body is not a message we understand.
    #[error("malformed control frame: {0}")]
    Malformed(String),
    /// The peer speaks another protocol, recognised by its first bytes (an HTTP or TLS server,
    /// an SSH one): what it is and what to run instead.
    #[error("{0}")]
    Foreign(String),
}

/// What a peer whose first four bytes are `b` speaks, if they are another protocol's: HTTP
/// (`HTTP/1.1 400 ...`), TLS (an alert or handshake record), SSH (its banner).
fn foreign(b: [u8; 4]) -> Option<String> {
    match b {
        [b'H', b'T', b'T', b'P'] => Some(
            "it answered in HTTP (\"HTTP/...\"): an HTTP server, not a `netblast serve`. For its request or \
             connection rate: netblast run --url http://ADDRESS:PORT/ (--no-keepalive opens a connection per \
             request)"
                .into(),
        ),
        [0x15 | 0x16, 0x03, 0..=0x04, _] => Some(
            "it answered with a TLS record: a TLS server, not a `netblast serve`. For its HTTPS rate: netblast run \
             --url https://ADDRESS:PORT/ (-k for a self-signed certificate)"
                .into(),
        ),
        [b'S', b'S', b'H', b'-'] => Some("it sent an SSH banner: an SSH server, not a `netblast serve`".into()),
        _ => None,
    }
}

/// Encodes a message as one frame (length prefix + JSON).
pub fn encode_frame<T: Serialize>(msg: &T) -> Vec<u8> {
    // Serialising our own plain-data messages cannot fail; a panic here is a bug.
    let body = serde_json::to_vec(msg).expect("control messages serialise");
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Reads the length prefix of a frame and checks it against [`MAX_FRAME`].
pub fn frame_len(prefix: [u8; 4]) -> Result<usize, FrameError> {
    let n = u32::from_be_bytes(prefix) as usize;
    if n > MAX_FRAME {
        return Err(foreign(prefix).map_or(FrameError::TooLong(n), FrameError::Foreign));
    }
    Ok(n)
}

/// Decodes a frame body.
pub fn decode_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Reading and writing frames over `std::io` streams (used by the client).
pub mod blocking {
    use super::*;
    use std::io::{self, Read, Write};

    /// Writes one frame.
    pub fn write_frame<W: Write, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
        w.write_all(&encode_frame(msg))
    }

    /// Reads one frame; `Ok(None)` on a clean EOF before the frame started.
    pub fn read_frame<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R) -> io::Result<Option<T>> {
        let mut prefix = [0u8; 4];
        match r.read_exact(&mut prefix) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        read_body(r, prefix).map(Some)
    }

    pub(crate) fn read_body<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R, prefix: [u8; 4]) -> io::Result<T> {
        let n = frame_len(prefix).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        // Grown as bytes arrive: a peer announcing a large frame and sending little costs little.
        let mut body = Vec::new();
        r.take(n as u64).read_to_end(&mut body)?;
        if body.len() < n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("a {n}-byte frame ended after {}", body.len()),
            ));
        }
        decode_body(&body).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// Reading and writing frames over tokio streams (feature `tokio`): for `serve` and the
/// coordinator.
#[cfg(feature = "tokio")]
pub mod nonblocking {
    use super::*;
    use std::io;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// Writes one frame.
    pub async fn write_frame<W: AsyncWrite + Unpin, T: Serialize>(w: &mut W, msg: &T) -> io::Result<()> {
        w.write_all(&encode_frame(msg)).await
    }

    /// Reads one frame's bytes (grown as they arrive); `Ok(None)` on a clean EOF first.
    pub async fn read_frame_bytes<R: AsyncRead + Unpin>(r: &mut R) -> io::Result<Option<Vec<u8>>> {
        let mut prefix = [0u8; 4];
        match r.read_exact(&mut prefix).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let n = frame_len(prefix).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let mut body = Vec::new();
        (&mut *r).take(n as u64).read_to_end(&mut body).await?;
        if body.len() < n {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("connection closed after {} of a {n}-byte frame", body.len()),
            ));
        }
        Ok(Some(body))
    }

    /// Reads and decodes one frame; `Ok(None)` on a clean EOF first.
    pub async fn read_frame<R: AsyncRead + Unpin, T: for<'de> Deserialize<'de>>(r: &mut R) -> io::Result<Option<T>> {
        match read_frame_bytes(r).await? {
            Some(b) => decode_body(&b).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
            None => Ok(None),
        }
    }
}

#[cfg(test)]
mod foreign_tests {
    use super::*;

    #[test]
    fn another_protocols_first_bytes_are_named_not_read_as_a_length() {
        let e = frame_len(*b"HTTP").unwrap_err().to_string();
        assert!(e.contains("an HTTP server") && e.contains("--url http://"), "{e}");
        let e = frame_len([0x15, 0x03, 0x03, 0x00]).unwrap_err().to_string();
        assert!(e.contains("a TLS server"), "{e}");
        assert!(frame_len(*b"SSH-").unwrap_err().to_string().contains("SSH"));
        // Any other length over the limit is said as one.
        let e = frame_len([0x7f, 0, 0, 0]).unwrap_err().to_string();
        assert!(e.contains("over the"), "{e}");
        assert_eq!(frame_len([0, 0, 1, 0]).unwrap(), 256);
    }
}
