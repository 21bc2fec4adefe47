//! The data-port protocol between `netblast run` and `netblast serve`.
//!
//! Every TCP connection to the data port opens with a fixed 32-byte [`Header`]:
//!
//! ```text
//! 0      4        6      7       8                24         28        32
//! | NBLT | ver u16 | role | flags | test id (16 B) | stream id | reserved |
//! ```
//!
//! (big-endian integers). For UDP tests a stream header is followed by the client's UDP port
//! (u16) and the server's ack by the server's UDP port (u16); both UDP sockets are connected to
//! each other, so the server exchanges datagrams with that one address and port only, and only
//! for the test's duration.
//!
//! A *control* connection then carries length-prefixed JSON frames
//! (`u32` big-endian length, then a [`ClientMsg`] or [`ServerMsg`]); a *stream* connection gets
//! a one-byte [`StreamAck`] and then carries test traffic only. Anything that does not start
//! with the magic is dropped by the server after one log line.

use crate::profile::{Profile, Way};
use crate::result::{CpuUsage, HostInfo, ProbeInfo, TcpStats};
use crate::units::Dur;
use serde::{Deserialize, Serialize};
use std::fmt;

/// First four bytes of every connection.
pub const MAGIC: [u8; 4] = *b"NBLT";
/// Protocol version spoken by this build.
pub const VERSION: u16 = 1;
/// Size of the connection header.
pub const HEADER_LEN: usize = 32;
/// Largest control frame accepted (guards against garbage lengths).
pub const MAX_FRAME: usize = 16 << 20;

/// Identifies one test on a server that runs many at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TestId(pub [u8; 16]);

impl fmt::Display for TestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Role {
    /// Carries the test's control frames.
    Control = 1,
    /// Carries one stream of test traffic.
    Stream = 2,
}

/// The fixed header that opens every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Protocol version of the sender.
    pub version: u16,
    /// Control or stream.
    pub role: Role,
    /// The test this connection belongs to.
    pub test_id: TestId,
    /// Stream id (0 for control connections).
    pub stream_id: u32,
}

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Not a netblast connection at all.
    #[error("not a netblast handshake (first bytes {0:02x?})")]
    BadMagic([u8; 4]),
    /// A netblast peer speaking another protocol version.
    #[error("peer speaks netblast protocol version {0}, this build speaks version {VERSION}")]
    BadVersion(u16),
    /// An unknown role byte.
    #[error("unknown connection role {0}")]
    BadRole(u8),
}

impl Header {
    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&self.version.to_be_bytes());
        b[6] = self.role as u8;
        b[8..24].copy_from_slice(&self.test_id.0);
        b[24..28].copy_from_slice(&self.stream_id.to_be_bytes());
        b
    }

    /// Decodes and checks a header.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, HeaderError> {
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(HeaderError::BadMagic(magic));
        }
        let version = u16::from_be_bytes([b[4], b[5]]);
        if version != VERSION {
            return Err(HeaderError::BadVersion(version));
        }
        let role = match b[6] {
            1 => Role::Control,
            2 => Role::Stream,
            r => return Err(HeaderError::BadRole(r)),
        };
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[8..24]);
        Ok(Header { version, role, test_id: TestId(id), stream_id: u32::from_be_bytes([b[24], b[25], b[26], b[27]]) })
    }
}

/// The server's one-byte answer to a stream header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StreamAck {
    /// Accepted; traffic may flow once the test starts.
    Ok = 0,
    /// No test with that id is set up (or it already started).
    UnknownTest = 1,
    /// The test exists but has no such stream, or it is already connected.
    UnknownStream = 2,
    /// The server's protocol version differs.
    BadVersion = 3,
}

impl StreamAck {
    /// Decodes an ack byte.
    pub fn from_byte(b: u8) -> Option<StreamAck> {
        Some(match b {
            0 => StreamAck::Ok,
            1 => StreamAck::UnknownTest,
            2 => StreamAck::UnknownStream,
            3 => StreamAck::BadVersion,
            _ => return None,
        })
    }

    /// What the ack means, for error messages.
    pub fn describe(self) -> &'static str {
        match self {
            StreamAck::Ok => "accepted",
            StreamAck::UnknownTest => "the server knows no such test",
            StreamAck::UnknownStream => "the server expects no such stream",
            StreamAck::BadVersion => "the server speaks another protocol version",
        }
    }
}

/// One stream the client will open.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamSetup {
    /// Stream id.
    pub id: u32,
    /// Which way bytes flow on it.
    pub way: Way,
    /// CPU the server should pin its end of the stream to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
}

/// What the client asks the server to host.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TestSetup {
    /// Client version, for messages.
    pub client_version: String,
    /// The validated profile (the server takes its parameters from it).
    pub profile: Profile,
    /// The time bound in effect; the server stops by itself shortly after it.
    pub time_bound: Dur,
    /// The streams the client will open.
    pub streams: Vec<StreamSetup>,
}

/// Frames from client to server on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
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
}

/// The server's totals for one stream.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
    pub rtt_hist: Option<crate::hist::EncodedHistogram>,
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
}

/// Frames from server to client on the control connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
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
        /// Why.
        message: String,
    },
    /// The server's counters for one interval.
    Interval {
        /// 0-based interval index on the server's clock.
        index: u32,
        /// Start, seconds since the server saw `Start`.
        start_s: f64,
        /// End, seconds since the server saw `Start`.
        end_s: f64,
        /// Per stream.
        streams: Vec<ServerSample>,
    },
    /// The server's totals; the last frame of a test.
    Final {
        /// Per stream.
        streams: Vec<ServerStreamFinal>,
        /// CPU used by the server threads that carried this test.
        cpu: CpuUsage,
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
        return Err(FrameError::TooLong(n));
    }
    Ok(n)
}

/// Decodes a frame body.
pub fn decode_body<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Blocking helpers over `std::io` streams (used by the client).
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
        let n = frame_len(prefix).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let mut body = vec![0u8; n];
        r.read_exact(&mut body)?;
        decode_body(&body).map(Some).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip() {
        let h = Header { version: VERSION, role: Role::Stream, test_id: TestId([7; 16]), stream_id: 42 };
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn header_rejects_garbage_and_versions() {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(b"GET ");
        assert!(matches!(Header::decode(&b), Err(HeaderError::BadMagic(_))));
        let h = Header { version: VERSION, role: Role::Control, test_id: TestId([1; 16]), stream_id: 0 };
        let mut b = h.encode();
        b[5] = 9;
        assert_eq!(Header::decode(&b), Err(HeaderError::BadVersion(9)));
        let mut b = h.encode();
        b[6] = 77;
        assert_eq!(Header::decode(&b), Err(HeaderError::BadRole(77)));
    }

    #[test]
    fn frames_roundtrip_and_reject_garbage() {
        let msg = ServerMsg::Refused { message: "no".into() };
        let f = encode_frame(&msg);
        let back: Option<ServerMsg> = blocking::read_frame(&mut f.as_slice()).unwrap();
        assert_eq!(back, Some(msg));
        assert!(frame_len([0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_body::<ClientMsg>(b"{\"type\":\"launch_missiles\"}").is_err());
        let empty: Option<ClientMsg> = blocking::read_frame(&mut &b""[..]).unwrap();
        assert!(empty.is_none());
    }
}
