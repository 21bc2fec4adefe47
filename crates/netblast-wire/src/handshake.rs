//! The handshake of a control, fleet or register connection, over the token primitives of
//! [`crate::auth`]: the dialing side's nonce, the listening side's [`ServerHello`] with its
//! proof, the dialing side's proof; the stream key both sides derive; a stream connection's
//! tagged preamble. Sans I/O first, then over blocking and tokio streams.

use crate::auth::{self, NONCE_LEN, PROOF_LEN, StreamKey, TAG_LEN, Token, Transcript};
use crate::frame::{Refusal, ServerMsg, refusal};
use crate::header::{HEADER_LEN, Header, MAGIC, MIN_VERSION, Role, StreamAck, VERSION, VersionMismatch};

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
    #[error(
        "authentication failed: the server did not prove it knows the token (a different token, or not the server meant)"
    )]
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
    /// The listener is at its limit of connections that have not proven themselves and closed
    /// this one to admit a newer one: dialing again may succeed.
    #[error("{0}")]
    Busy(String),
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

    /// The oldest version this handshake's role takes.
    fn min_version(&self) -> u16 {
        Header::decode(&self.header).map(|h| h.role.min_version()).unwrap_or(MIN_VERSION)
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
            let ours = (self.min_version(), VERSION);
            let theirs = hello.range;
            if theirs.1 < ours.0 || theirs.0 > ours.1 {
                return Err(HandshakeError::Version(VersionMismatch { theirs, ours }));
            }
            return Err(HandshakeError::Refused(String::new()));
        }
        if hello.version < self.min_version() || hello.version > VERSION {
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
    match header.negotiate() {
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

/// The tag-bearing preamble a stream connection sends after its header.
pub fn stream_preamble(header: &Header, key: &StreamKey) -> Vec<u8> {
    let mut v = header.encode().to_vec();
    v.extend_from_slice(&key.tag(&header.test_id.0, header.stream_id));
    v
}

/// Length of a stream connection's tag.
pub const STREAM_TAG_LEN: usize = TAG_LEN;

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

impl HandshakeFailure {
    /// Whether dialing again may succeed: the listener said it is at its limit of connections
    /// that have not proven themselves, or closed or reset the connection before the
    /// handshake ended (what it does to a connection that had not spoken when it made room).
    pub fn is_busy(&self) -> bool {
        match self {
            HandshakeFailure::Handshake(HandshakeError::Busy(_)) => true,
            HandshakeFailure::Io(e) => closed_early(e),
            HandshakeFailure::Handshake(_) => false,
        }
    }
}

/// Whether an I/O error is the peer closing or resetting the connection.
pub fn closed_early(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(e.kind(), UnexpectedEof | ConnectionReset | ConnectionAborted | BrokenPipe)
}

/// The pauses of a dialing side before each new attempt after a handshake a busy listener
/// closed or refused ([`HandshakeFailure::is_busy`]): 50 ms doubling, 1.55 s in all, well
/// within a connect timeout. A listener at its cap closes its oldest unproven connection for
/// each new one, so a few attempts get through all but a flood of connections from the
/// dialing side's own address.
pub const BUSY_BACKOFF: [std::time::Duration; 5] = [
    std::time::Duration::from_millis(50),
    std::time::Duration::from_millis(100),
    std::time::Duration::from_millis(200),
    std::time::Duration::from_millis(400),
    std::time::Duration::from_millis(800),
];

/// The words of a dialing side that gave up on a busy listener after `attempts` tries.
pub fn busy_words(attempts: usize, last: &dyn std::fmt::Display) -> String {
    format!(
        "refused {attempts} times by a server that is at its limit of unproven connections (or closed by it during the handshake); the last time: {last}"
    )
}

/// The dialing side over `std::io` streams (used by the client).
pub mod blocking {
    use super::*;
    use crate::frame::blocking::{read_body, read_frame};
    use std::io::{Read, Write};

    /// The reason in a refusal frame that follows, or what arrived instead.
    fn refusal_text<R: Read>(r: &mut R, prefix: Option<[u8; 4]>) -> HandshakeError {
        let msg = match prefix {
            Some(p) => read_body::<_, ServerMsg>(r, p).map(Some),
            None => read_frame::<_, ServerMsg>(r),
        };
        match msg {
            Ok(Some(ServerMsg::Refused { message, reason: Some(Refusal::Busy) })) => HandshakeError::Busy(message),
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

/// Both sides over tokio streams (feature `tokio`): for `serve` and the coordinator.
#[cfg(feature = "tokio")]
pub mod nonblocking {
    use super::*;
    use crate::frame::nonblocking::read_frame;
    use crate::frame::{decode_body, frame_len};
    use std::io;
    use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

    /// Runs the dialing side of a handshake over `s` (a timeout is the caller's).
    pub async fn client_handshake<S: AsyncRead + AsyncWrite + Unpin>(
        s: &mut S,
        hs: &ClientHandshake,
    ) -> Result<Session, HandshakeFailure> {
        s.write_all(&hs.hello()).await?;
        let mut b = [0u8; SERVER_HELLO_LEN];
        s.read_exact(&mut b[..4]).await?;
        let refusal = |m: io::Result<Option<ServerMsg>>| match m {
            Ok(Some(ServerMsg::Refused { message, reason: Some(Refusal::Busy) })) => HandshakeError::Busy(message),
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
