//! The connection header every data-port connection opens with, version negotiation, and a
//! stream connection's one-byte answer.

use std::fmt;

/// First four bytes of every connection (and of a `ServerHello` (handshake)).
pub const MAGIC: [u8; 4] = *b"NBLT";
/// Newest protocol version spoken by this build. Version 4: a fleet's frames carry results in
/// the `netblast.run/4` form (a message kind's totals in their own types); version 3 carried
/// /3 results, whose flat totals a version 4 peer would drop. Control and stream connections
/// are as in 2.
pub const VERSION: u16 = 4;
/// Oldest protocol version spoken by this build (version 1 had no authentication).
pub const MIN_VERSION: u16 = 2;
/// Oldest protocol version of a fleet connection (coordinator and agent): version 3's frames
/// carry results in the `netblast.run/3` form (version 2's, intervals in the /2 form), whose
/// figures a newer peer would drop or misread.
pub const FLEET_MIN_VERSION: u16 = 4;
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
        // The kernel's random source works on every Linux netblast runs on; a panic is a bug.
        getrandom::getrandom(&mut id).expect("the kernel's random number source works");
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
    /// The oldest protocol version this build speaks on a connection of this role.
    pub fn min_version(self) -> u16 {
        match self {
            Role::Control | Role::Stream => MIN_VERSION,
            Role::Fleet | Role::Register => FLEET_MIN_VERSION,
        }
    }

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
    if lo == hi { format!("{hi}") } else { format!("{lo} to {hi}") }
}

/// The highest version both a peer speaking `theirs` (oldest, newest) and this build speak on
/// a control or stream connection.
pub fn negotiate(theirs: (u16, u16)) -> Result<u16, VersionMismatch> {
    negotiate_from(MIN_VERSION, theirs)
}

fn negotiate_from(ours_min: u16, theirs: (u16, u16)) -> Result<u16, VersionMismatch> {
    let v = theirs.1.min(VERSION);
    if v < ours_min || v < theirs.0 {
        return Err(VersionMismatch { theirs, ours: (ours_min, VERSION) });
    }
    Ok(v)
}

impl Header {
    /// A header of this build's version range.
    pub fn new(role: Role, test_id: TestId, stream_id: u32) -> Header {
        Header { version: VERSION, min_version: role.min_version(), role, test_id, stream_id }
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

    /// The highest version both the sender and this build speak for this connection's role.
    pub fn negotiate(&self) -> Result<u16, VersionMismatch> {
        negotiate_from(self.role.min_version(), self.range())
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
    /// The stream's tag is wrong: it does not belong to the connection that set the test up.
    BadTag = 4,
    /// A limit of the server (streams, descriptors) refuses it.
    Limit = 5,
    /// Every port the server's flows may take (`serve --flow-ports`) is in use.
    NoPort = 6,
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
            6 => StreamAck::NoPort,
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
            StreamAck::NoPort => {
                "every port the server gives its flows (serve --flow-ports) is taken: give it more, or run fewer flows"
            }
        }
    }
}
