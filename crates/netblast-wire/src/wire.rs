//! The data-port protocol (version 2) between `netblast run`, `netblast serve` and a fleet
//! coordinator.
//!
//! Every TCP connection to the data port opens with a fixed 32-byte [`Header`]:
//!
//! ```text
//! 0      4         6      7       8                24          28          30         32
//! | NBLT | max ver | role | flags | test id (16 B) | stream id | min ver   | reserved |
//! ```
//!
//! (big-endian integers; a version 1 peer leaves `min ver` zero, meaning "only max ver").
//!
//! - *Stream* connections follow the header with a 16-byte tag (see [`crate::auth`]): only the
//!   connection that set the test up knows the key. For UDP flows the tag is followed by the
//!   client's UDP port (u16) and the server's one-byte [`StreamAck`] by the server's UDP port;
//!   both UDP sockets are connected to each other, so the server exchanges datagrams with that
//!   one address and port only, for the test's duration. Then traffic only.
//! - *Control*, *fleet* and *register* connections follow the header with the dialing side's
//!   32-byte nonce; the listening side answers with a [`ServerHello`] (the version it chose, its
//!   nonce, its proof when it has a token); when it asks for authentication the dialing side
//!   sends its 32-byte proof. Then length-prefixed JSON frames (`u32` big-endian length): a
//!   [`ClientMsg`]/[`ServerMsg`] exchange for a test, [`netblast_spec::fleet`] messages for a fleet.
//!
//! Version negotiation: each side speaks a range; the highest common version wins, and a peer
//! with no common version gets a refusal naming both ranges (a version 1 peer in the form it
//! understands: a `refused` frame on a control connection, an ack byte on a stream).
//!
//! Frames tolerate unknown fields (a newer peer may add optional information); a profile inside
//! a set-up stays strict, since ignoring a setting would run another test than the one asked.

use crate::auth::{self, StreamKey, Token, Transcript, NONCE_LEN, PROOF_LEN, TAG_LEN};
use netblast_spec::profile::{Profile, Way};
use netblast_spec::result::{CpuUsage, HostInfo, ProbeInfo, TcpStats};
use netblast_spec::units::Dur;
use serde::{Deserialize, Serialize};
use std::fmt;

/// First four bytes of every connection (and of a [`ServerHello`]).
pub const MAGIC: [u8; 4] = *b"NBLT";
/// Newest protocol version spoken by this build.
pub const VERSION: u16 = 2;
/// Oldest protocol version spoken by this build (version 1 had no authentication).
pub const MIN_VERSION: u16 = 2;
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

impl TestId {
    /// A fresh random id.
    pub fn random() -> TestId {
        let mut id = [0u8; 16];
        id.copy_from_slice(&auth::nonce()[..16]);
        TestId(id)
    }
}

/// What a connection is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Role {
    /// Sets up one test and carries its control frames.
    Control = 1,
    /// Carries one stream of test traffic.
    Stream = 2,
    /// A coordinator giving an agent orders (the coordinator dialed the agent).
    Fleet = 3,
    /// An agent offering itself to a coordinator for orders (the agent dialed).
    Register = 4,
}

impl Role {
    /// The role in words, for logs.
    pub fn name(self) -> &'static str {
        match self {
            Role::Control => "control",
            Role::Stream => "stream",
            Role::Fleet => "fleet",
            Role::Register => "register",
        }
    }
}

/// The fixed header that opens every connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Newest protocol version of the sender.
    pub version: u16,
    /// Oldest protocol version of the sender (equal to `version` for a version 1 peer).
    pub min_version: u16,
    /// Control, stream, fleet or register.
    pub role: Role,
    /// The test this connection belongs to (random for fleet and register connections).
    pub test_id: TestId,
    /// Stream id (0 for other connections).
    pub stream_id: u32,
}

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// Not a netblast connection at all.
    #[error("not a netblast handshake (first bytes {0:02x?})")]
    BadMagic([u8; 4]),
    /// An unknown role byte.
    #[error("unknown connection role {0}")]
    BadRole(u8),
}

/// Two peers with no protocol version in common.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the peer speaks netblast protocol version {}, this build speaks version {}", range(*.theirs), range(*.ours))]
pub struct VersionMismatch {
    /// The peer's range (oldest, newest).
    pub theirs: (u16, u16),
    /// This build's range.
    pub ours: (u16, u16),
}

fn range((lo, hi): (u16, u16)) -> String {
    if lo == hi {
        format!("{hi}")
    } else {
        format!("{lo} to {hi}")
    }
}

/// The highest version both a peer speaking `theirs` (oldest, newest) and this build speak.
pub fn negotiate(theirs: (u16, u16)) -> Result<u16, VersionMismatch> {
    let v = theirs.1.min(VERSION);
    if v < MIN_VERSION || v < theirs.0 {
        return Err(VersionMismatch { theirs, ours: (MIN_VERSION, VERSION) });
    }
    Ok(v)
}

impl Header {
    /// A header of this build's version range.
    pub fn new(role: Role, test_id: TestId, stream_id: u32) -> Header {
        Header { version: VERSION, min_version: MIN_VERSION, role, test_id, stream_id }
    }

    /// Encodes the header.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4..6].copy_from_slice(&self.version.to_be_bytes());
        b[6] = self.role as u8;
        b[8..24].copy_from_slice(&self.test_id.0);
        b[24..28].copy_from_slice(&self.stream_id.to_be_bytes());
        b[28..30].copy_from_slice(&self.min_version.to_be_bytes());
        b
    }

    /// Decodes a header (any version: see [`negotiate`]).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, HeaderError> {
        let magic = [b[0], b[1], b[2], b[3]];
        if magic != MAGIC {
            return Err(HeaderError::BadMagic(magic));
        }
        let version = u16::from_be_bytes([b[4], b[5]]);
        let role = match b[6] {
            1 => Role::Control,
            2 => Role::Stream,
            3 => Role::Fleet,
            4 => Role::Register,
            r => return Err(HeaderError::BadRole(r)),
        };
        let mut id = [0u8; 16];
        id.copy_from_slice(&b[8..24]);
        let min = u16::from_be_bytes([b[28], b[29]]);
        Ok(Header {
            version,
            min_version: if min == 0 || min > version { version } else { min },
            role,
            test_id: TestId(id),
            stream_id: u32::from_be_bytes([b[24], b[25], b[26], b[27]]),
        })
    }

    /// The sender's version range (oldest, newest).
    pub fn range(&self) -> (u16, u16) {
        (self.min_version, self.version)
    }
}

/// Length of a [`ServerHello`].
pub const SERVER_HELLO_LEN: usize = 76;

/// What the listening side answers to a header and nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerHello {
    /// 0: go on; otherwise a `refused` frame follows and the connection closes.
    pub status: u8,
    /// The version chosen (status 0).
    pub version: u16,
    /// The listener's version range (oldest, newest).
    pub range: (u16, u16),
    /// Whether the dialing side must prove it knows the token.
    pub auth_required: bool,
    /// The listener's nonce.
    pub nonce: [u8; NONCE_LEN],
    /// The listener's proof (zeros when it has no token).
    pub proof: [u8; PROOF_LEN],
}

impl ServerHello {
    /// Status: proceed.
    pub const OK: u8 = 0;
    /// Status: refused; a `refused` frame follows.
    pub const REFUSED: u8 = 1;

    /// Encodes the hello.
    pub fn encode(&self) -> [u8; SERVER_HELLO_LEN] {
        let mut b = [0u8; SERVER_HELLO_LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = self.status;
        b[5..7].copy_from_slice(&self.version.to_be_bytes());
        b[7..9].copy_from_slice(&self.range.0.to_be_bytes());
        b[9..11].copy_from_slice(&self.range.1.to_be_bytes());
        b[11] = u8::from(self.auth_required);
        b[12..44].copy_from_slice(&self.nonce);
        b[44..76].copy_from_slice(&self.proof);
        b
    }

    /// Decodes a hello; `None` when it does not start with the magic.
    pub fn decode(b: &[u8; SERVER_HELLO_LEN]) -> Option<ServerHello> {
        if b[0..4] != MAGIC || b[11] > 1 {
            return None;
        }
        let u16_at = |i: usize| u16::from_be_bytes([b[i], b[i + 1]]);
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&b[12..44]);
        let mut proof = [0u8; PROOF_LEN];
        proof.copy_from_slice(&b[44..76]);
        Some(ServerHello {
            status: b[4],
            version: u16_at(5),
            range: (u16_at(7), u16_at(9)),
            auth_required: b[11] == 1,
            nonce,
            proof,
        })
    }
}

/// Why a handshake failed, on the dialing side.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// No common protocol version.
    #[error("{0}")]
    Version(VersionMismatch),
    /// The listener wants a token and none was given.
    #[error(
        "authentication required: the server has a token; give the same one with --token-file FILE or NETBLAST_TOKEN"
    )]
    TokenRequired,
    /// The listener did not prove it knows the token.
    #[error("authentication failed: the server did not prove it knows the token (a different token, or not the server meant)")]
    ServerNotAuthenticated,
    /// The listener has no token but this side insists on one.
    #[error("the server does not authenticate (it runs without --token-file); refusing to send it orders")]
    ServerHasNoToken,
    /// The answer is not a netblast hello.
    #[error("not a netblast server: {0}")]
    NotNetblast(String),
    /// The listener refused (its reason).
    #[error("{0}")]
    Refused(String),
}

/// The dialing side of a handshake, sans I/O: send [`ClientHandshake::hello`], read a
/// [`ServerHello`], call [`ClientHandshake::finish`] and send what it returns.
#[derive(Debug, Clone)]
pub struct ClientHandshake {
    header: [u8; HEADER_LEN],
    nonce: [u8; NONCE_LEN],
    token: Option<Token>,
    require_token: bool,
}

/// What a handshake established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Session {
    /// The protocol version in use.
    pub version: u16,
    /// Whether both sides proved the token.
    pub authenticated: bool,
    /// The key of this test's stream tags.
    pub stream_key: StreamKey,
}

impl ClientHandshake {
    /// A handshake for `header`. With `require_token` the listener must have and prove a
    /// token (a coordinator never orders an agent that anyone could order).
    pub fn new(header: Header, token: Option<Token>, require_token: bool) -> ClientHandshake {
        ClientHandshake { header: header.encode(), nonce: auth::nonce(), token, require_token }
    }

    /// The first bytes to send: header and nonce.
    pub fn hello(&self) -> Vec<u8> {
        let mut v = self.header.to_vec();
        v.extend_from_slice(&self.nonce);
        v
    }

    /// Takes the listener's hello; returns the bytes to send next (the proof; empty when no
    /// proof is asked) and the session.
    pub fn finish(&self, hello: &ServerHello) -> Result<(Vec<u8>, Session), HandshakeError> {
        if hello.status != ServerHello::OK {
            // A refusal frame follows; the caller reads it. Name the versions when they are why.
            let ours = (MIN_VERSION, VERSION);
            let theirs = hello.range;
            if theirs.1 < ours.0 || theirs.0 > ours.1 {
                return Err(HandshakeError::Version(VersionMismatch { theirs, ours }));
            }
            return Err(HandshakeError::Refused(String::new()));
        }
        if hello.version < MIN_VERSION || hello.version > VERSION {
            return Err(HandshakeError::NotNetblast(format!("it chose protocol version {}", hello.version)));
        }
        let t = Transcript { header: self.header, client_nonce: self.nonce, server_nonce: hello.nonce };
        let session = |authenticated| Session {
            version: hello.version,
            authenticated,
            stream_key: t.stream_key(self.token.as_ref().filter(|_| authenticated)),
        };
        match (&self.token, hello.auth_required) {
            (None, true) => Err(HandshakeError::TokenRequired),
            (None, false) => Ok((Vec::new(), session(false))),
            (Some(_), false) if self.require_token => Err(HandshakeError::ServerHasNoToken),
            (Some(_), false) => Ok((Vec::new(), session(false))),
            (Some(tok), true) => {
                if !t.verify_server(tok, &hello.proof) {
                    return Err(HandshakeError::ServerNotAuthenticated);
                }
                Ok((t.client_proof(tok).to_vec(), session(true)))
            }
        }
    }
}

/// The listening side's decision on a header and nonce, sans I/O.
#[derive(Debug)]
pub enum Admit {
    /// Send `reply` (a hello and a `refused` frame), log `why`, close.
    Refuse {
        /// Bytes to send before closing.
        reply: Vec<u8>,
        /// For the log.
        why: String,
    },
    /// Send `hello`; then, if `auth` asks for it, read the dialing side's proof and check it.
    Proceed {
        /// The hello to send.
        hello: [u8; SERVER_HELLO_LEN],
        /// The pending check.
        auth: PendingAuth,
    },
}

/// A handshake waiting for the dialing side's proof (or not, without a token).
#[derive(Debug)]
pub struct PendingAuth {
    transcript: Transcript,
    token: Option<Token>,
    version: u16,
}

impl PendingAuth {
    /// Whether a proof must be read next.
    pub fn needs_proof(&self) -> bool {
        self.token.is_some()
    }

    /// Checks the proof (ignored without a token). `Err` carries a `refused` frame to send.
    pub fn check(self, proof: Option<&[u8]>) -> Result<Session, Vec<u8>> {
        match &self.token {
            None => Ok(Session {
                version: self.version,
                authenticated: false,
                stream_key: self.transcript.stream_key(None),
            }),
            Some(tok) if proof.is_some_and(|p| p.len() == PROOF_LEN && self.transcript.verify_client(tok, p)) => {
                Ok(Session {
                    version: self.version,
                    authenticated: true,
                    stream_key: self.transcript.stream_key(Some(tok)),
                })
            }
            Some(_) => Err(refusal(Refusal::Auth, "authentication failed: wrong token".into())),
        }
    }
}

/// Decides on a (non-stream) connection's header and nonce: version, then the hello.
pub fn admit(
    header: &Header,
    header_bytes: &[u8; HEADER_LEN],
    nonce: &[u8; NONCE_LEN],
    token: Option<&Token>,
) -> Admit {
    let hello = |status, version, proof: [u8; PROOF_LEN], server_nonce| ServerHello {
        status,
        version,
        range: (MIN_VERSION, VERSION),
        auth_required: token.is_some(),
        nonce: server_nonce,
        proof,
    };
    match negotiate(header.range()) {
        Err(e) => {
            let mut reply = hello(ServerHello::REFUSED, 0, [0; PROOF_LEN], [0; NONCE_LEN]).encode().to_vec();
            reply.extend_from_slice(&refusal(Refusal::Version, e.to_string()));
            Admit::Refuse { reply, why: e.to_string() }
        }
        Ok(version) => {
            let server_nonce = auth::nonce();
            let transcript = Transcript { header: *header_bytes, client_nonce: *nonce, server_nonce };
            let proof = token.map(|t| transcript.server_proof(t)).unwrap_or([0; PROOF_LEN]);
            Admit::Proceed {
                hello: hello(ServerHello::OK, version, proof, server_nonce).encode(),
                auth: PendingAuth { transcript, token: token.cloned(), version },
            }
        }
    }
}

/// What to answer a header whose version this build does not speak, in a form the peer reads:
/// a version 1 peer expects a `refused` frame (control) or an ack byte (stream); a newer peer
/// reads a hello with the refusal status, then the frame.
pub fn version_refusal(header: &Header, e: &VersionMismatch) -> Vec<u8> {
    match (header.version, header.role) {
        (1, Role::Stream) => vec![StreamAck::BadVersion as u8],
        (1, _) => refusal(Refusal::Version, e.to_string()),
        (_, Role::Stream) => vec![StreamAck::BadVersion as u8],
        _ => {
            let hello = ServerHello {
                status: ServerHello::REFUSED,
                version: 0,
                range: (MIN_VERSION, VERSION),
                auth_required: false,
                nonce: [0; NONCE_LEN],
                proof: [0; PROOF_LEN],
            };
            let mut v = hello.encode().to_vec();
            v.extend_from_slice(&refusal(Refusal::Version, e.to_string()));
            v
        }
    }
}

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
}

/// A `refused` frame.
pub fn refusal(reason: Refusal, message: String) -> Vec<u8> {
    encode_frame(&ServerMsg::Refused { message, reason: Some(reason) })
}

/// The tag-bearing preamble a stream connection sends after its header.
pub fn stream_preamble(header: &Header, key: &StreamKey) -> Vec<u8> {
    let mut v = header.encode().to_vec();
    v.extend_from_slice(&key.tag(&header.test_id.0, header.stream_id));
    v
}

/// Length of a stream connection's tag.
pub const STREAM_TAG_LEN: usize = TAG_LEN;

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
    /// The stream's tag is wrong: it does not belong to the connection that set the test up.
    BadTag = 4,
    /// A limit of the server (streams, descriptors) refuses it.
    Limit = 5,
}

impl StreamAck {
    /// Decodes an ack byte.
    pub fn from_byte(b: u8) -> Option<StreamAck> {
        Some(match b {
            0 => StreamAck::Ok,
            1 => StreamAck::UnknownTest,
            2 => StreamAck::UnknownStream,
            3 => StreamAck::BadVersion,
            4 => StreamAck::BadTag,
            5 => StreamAck::Limit,
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
            StreamAck::BadTag => "the stream's authentication tag is wrong",
            StreamAck::Limit => "a limit of the server refuses the stream",
        }
    }
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

/// Why a dialing side's handshake did not complete.
#[derive(Debug, thiserror::Error)]
pub enum HandshakeFailure {
    /// The connection failed or timed out.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The peer refused, or is not what it should be.
    #[error("{0}")]
    Handshake(#[from] HandshakeError),
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
        read_body(r, prefix).map(Some)
    }

    fn read_body<R: Read, T: for<'de> Deserialize<'de>>(r: &mut R, prefix: [u8; 4]) -> io::Result<T> {
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

    /// The reason in a refusal frame that follows, or what arrived instead.
    fn refusal_text<R: Read>(r: &mut R, prefix: Option<[u8; 4]>) -> HandshakeError {
        let msg = match prefix {
            Some(p) => read_body::<_, ServerMsg>(r, p).map(Some),
            None => read_frame::<_, ServerMsg>(r),
        };
        match msg {
            Ok(Some(ServerMsg::Refused { message, .. })) => HandshakeError::Refused(message),
            Ok(Some(other)) => HandshakeError::NotNetblast(format!("unexpected {other:?}")),
            Ok(None) => HandshakeError::Refused("the server closed the connection".into()),
            Err(e) => HandshakeError::NotNetblast(e.to_string()),
        }
    }

    /// Runs the dialing side of a handshake over `s`.
    pub fn handshake<S: Read + Write>(s: &mut S, hs: &ClientHandshake) -> Result<Session, HandshakeFailure> {
        s.write_all(&hs.hello())?;
        let mut b = [0u8; SERVER_HELLO_LEN];
        s.read_exact(&mut b[..4])?;
        if b[..4] != MAGIC {
            // A version 1 server answers a header it cannot take with a refusal frame.
            let prefix = [b[0], b[1], b[2], b[3]];
            return Err(refusal_text(s, Some(prefix)).into());
        }
        s.read_exact(&mut b[4..])?;
        let hello = ServerHello::decode(&b).ok_or_else(|| HandshakeError::NotNetblast("malformed hello".into()))?;
        match hs.finish(&hello) {
            Ok((proof, session)) => {
                s.write_all(&proof)?;
                Ok(session)
            }
            Err(HandshakeError::Refused(_)) => Err(refusal_text(s, None).into()),
            Err(e @ HandshakeError::Version(_)) => {
                let _ = refusal_text(s, None);
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// The same helpers over tokio streams (feature `tokio`): for `serve` and the coordinator.
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

    /// Runs the dialing side of a handshake over `s` (a timeout is the caller's).
    pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(
        s: &mut S,
        hs: &ClientHandshake,
    ) -> Result<Session, HandshakeFailure> {
        s.write_all(&hs.hello()).await?;
        let mut b = [0u8; SERVER_HELLO_LEN];
        s.read_exact(&mut b[..4]).await?;
        let refusal = |m: io::Result<Option<ServerMsg>>| match m {
            Ok(Some(ServerMsg::Refused { message, .. })) => HandshakeError::Refused(message),
            Ok(Some(other)) => HandshakeError::NotNetblast(format!("unexpected {other:?}")),
            Ok(None) => HandshakeError::Refused("the peer closed the connection".into()),
            Err(e) => HandshakeError::NotNetblast(e.to_string()),
        };
        if b[..4] != MAGIC {
            let n = frame_len([b[0], b[1], b[2], b[3]]).map_err(|e| HandshakeError::NotNetblast(e.to_string()))?;
            let mut body = Vec::new();
            (&mut *s).take(n as u64).read_to_end(&mut body).await?;
            return Err(refusal(decode_body(&body).map(Some).map_err(io::Error::other)).into());
        }
        s.read_exact(&mut b[4..]).await?;
        let hello = ServerHello::decode(&b).ok_or_else(|| HandshakeError::NotNetblast("malformed hello".into()))?;
        match hs.finish(&hello) {
            Ok((proof, session)) => {
                s.write_all(&proof).await?;
                Ok(session)
            }
            Err(HandshakeError::Refused(_)) => Err(refusal(read_frame(s).await).into()),
            Err(e @ HandshakeError::Version(_)) => Err(e.into()),
            Err(e) => Err(e.into()),
        }
    }

    /// A peer refused by the listening side: the class and the words (already answered).
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub struct Refused {
        /// Why, as a class.
        pub reason: Refusal,
        /// Why, in words.
        pub why: String,
    }

    /// Runs the listening side of a handshake on a header already read: the nonce, the hello,
    /// the proof. `not_allowed`: the words to refuse a peer this side does not take at all.
    /// A refused peer has been answered; the caller logs and closes.
    pub async fn server_handshake<S: AsyncRead + AsyncWrite + Unpin>(
        s: &mut S,
        header: &Header,
        header_bytes: &[u8; HEADER_LEN],
        token: Option<&Token>,
        not_allowed: Option<&str>,
    ) -> Result<Session, Refused> {
        let refused = |reason, why: &str| Refused { reason, why: why.to_string() };
        let mut nonce = [0u8; NONCE_LEN];
        s.read_exact(&mut nonce).await.map_err(|_| refused(Refusal::Invalid, "no nonce after the header"))?;
        let (hello, auth) = match admit(header, header_bytes, &nonce, token) {
            Admit::Refuse { reply, why } => {
                let _ = s.write_all(&reply).await;
                return Err(refused(Refusal::Version, &why));
            }
            Admit::Proceed { hello, auth } => (hello, auth),
        };
        if let Some(why) = not_allowed {
            // Said after a hello, so the peer reads it as a refusal and not as garbage.
            let mut h = ServerHello::decode(&hello).expect("our own hello decodes");
            h.status = ServerHello::REFUSED;
            let mut reply = h.encode().to_vec();
            reply.extend_from_slice(&refusal(Refusal::NotAllowed, why.to_string()));
            let _ = s.write_all(&reply).await;
            return Err(refused(Refusal::NotAllowed, why));
        }
        s.write_all(&hello).await.map_err(|e| refused(Refusal::Invalid, &e.to_string()))?;
        let mut proof = [0u8; PROOF_LEN];
        let got = if auth.needs_proof() { s.read_exact(&mut proof).await.ok().map(|_| &proof[..]) } else { None };
        match auth.check(got) {
            Ok(session) => Ok(session),
            Err(reply) => {
                let _ = s.write_all(&reply).await;
                Err(refused(Refusal::Auth, "authentication failed (wrong or missing token)"))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn header_roundtrip() {
        let h = Header::new(Role::Stream, TestId([7; 16]), 42);
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
        let h = Header::new(Role::Register, TestId([1; 16]), 0);
        assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    }

    #[test]
    fn header_rejects_garbage_and_roles() {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(b"GET ");
        assert!(matches!(Header::decode(&b), Err(HeaderError::BadMagic(_))));
        let h = Header::new(Role::Control, TestId([1; 16]), 0);
        let mut b = h.encode();
        b[6] = 77;
        assert_eq!(Header::decode(&b), Err(HeaderError::BadRole(77)));
    }

    #[test]
    fn versions_negotiate_and_a_v1_peer_is_named() {
        assert_eq!(negotiate((2, 2)), Ok(2));
        assert_eq!(negotiate((2, 9)), Ok(2), "a newer peer that still speaks 2");
        let e = negotiate((1, 1)).unwrap_err();
        assert_eq!(e.to_string(), "the peer speaks netblast protocol version 1, this build speaks version 2");
        assert!(negotiate((3, 4)).is_err());
        // A version 1 header: min field zero means "only version 1".
        let mut b = Header::new(Role::Control, TestId([1; 16]), 0).encode();
        b[4..6].copy_from_slice(&1u16.to_be_bytes());
        b[28..30].copy_from_slice(&[0, 0]);
        let h = Header::decode(&b).unwrap();
        assert_eq!(h.range(), (1, 1));
        // What a version 1 client reads back: a refused frame naming both versions.
        let reply = version_refusal(&h, &negotiate(h.range()).unwrap_err());
        let msg: ServerMsg = blocking::read_frame(&mut reply.as_slice()).unwrap().unwrap();
        assert!(
            matches!(msg, ServerMsg::Refused { ref message, .. } if message.contains("version 1") && message.contains("version 2"))
        );
    }

    #[test]
    fn frames_roundtrip_and_reject_garbage() {
        let msg = ServerMsg::Refused { message: "no".into(), reason: Some(Refusal::Limit) };
        let f = encode_frame(&msg);
        let back: Option<ServerMsg> = blocking::read_frame(&mut f.as_slice()).unwrap();
        assert_eq!(back, Some(msg));
        assert!(frame_len([0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(decode_body::<ClientMsg>(b"{\"type\":\"launch_missiles\"}").is_err());
        let empty: Option<ClientMsg> = blocking::read_frame(&mut &b""[..]).unwrap();
        assert!(empty.is_none());
        // Unknown fields from a newer peer are ignored; a version 1 refusal has no reason.
        let m: ServerMsg = decode_body(b"{\"type\":\"refused\",\"message\":\"x\",\"future\":1}").unwrap();
        assert_eq!(m, ServerMsg::Refused { message: "x".into(), reason: None });
    }

    /// One end of an in-memory duplex: reads come from `input`, writes go to `output`.
    struct Pipe {
        input: std::io::Cursor<Vec<u8>>,
        output: Vec<u8>,
    }

    impl Read for Pipe {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            self.input.read(buf)
        }
    }

    impl Write for Pipe {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.output.write(buf)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    /// Runs both sides: the server decides on the client's hello; the client reads the answer.
    fn both(
        client_token: Option<&str>,
        server_token: Option<&str>,
        require: bool,
    ) -> (Result<Session, String>, Result<Session, String>) {
        let ct = client_token.map(|t| Token::new(t).unwrap());
        let st = server_token.map(|t| Token::new(t).unwrap());
        let header = Header::new(Role::Control, TestId([5; 16]), 0);
        let hs = ClientHandshake::new(header, ct, require);
        let hello = hs.hello();
        let hb: [u8; HEADER_LEN] = hello[..HEADER_LEN].try_into().unwrap();
        let nonce: [u8; NONCE_LEN] = hello[HEADER_LEN..].try_into().unwrap();
        let Admit::Proceed { hello: sh, auth } = admit(&Header::decode(&hb).unwrap(), &hb, &nonce, st.as_ref()) else {
            panic!("refused")
        };
        let mut pipe = Pipe { input: std::io::Cursor::new(sh.to_vec()), output: Vec::new() };
        let client = blocking::handshake(&mut pipe, &hs).map_err(|e| e.to_string());
        let proof = &pipe.output[hello.len()..];
        let needs = auth.needs_proof();
        let server =
            auth.check(if needs && !proof.is_empty() { Some(proof) } else { None }).map_err(|_| "refused".to_string());
        (client, server)
    }

    #[test]
    fn handshakes_authenticate_both_ways() {
        let tok = "a-shared-token-of-some-length";
        let (c, s) = both(Some(tok), Some(tok), true);
        let (c, s) = (c.unwrap(), s.unwrap());
        assert!(c.authenticated && s.authenticated);
        assert_eq!(c.stream_key, s.stream_key, "both sides derive the same stream key");
        let (c, s) = both(Some("the-wrong-token-entirely"), Some(tok), false);
        assert!(c.unwrap_err().contains("did not prove"), "the server's proof fails with another token");
        assert!(s.is_err());
        let (c, _) = both(None, Some(tok), false);
        assert!(c.unwrap_err().contains("authentication required"));
        let (c, s) = both(None, None, false);
        assert!(!c.unwrap().authenticated && s.is_ok());
        let (c, _) = both(Some(tok), None, true);
        assert!(c.unwrap_err().contains("does not authenticate"));
    }

    #[test]
    fn a_v1_server_refusal_reads_as_such() {
        let v1 = encode_frame(
            &serde_json::json!({"type": "refused", "message": "peer speaks netblast protocol version 2, this build speaks version 1"}),
        );
        let mut pipe = Pipe { input: std::io::Cursor::new(v1), output: Vec::new() };
        let hs = ClientHandshake::new(Header::new(Role::Control, TestId([5; 16]), 0), None, false);
        let e = blocking::handshake(&mut pipe, &hs).unwrap_err().to_string();
        assert!(e.contains("version 1"), "{e}");
    }
}
