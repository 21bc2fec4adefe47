//! One accepted connection to the data port: its header read (a peer that is not netblast is
//! turned away on its first bytes), its version checked, then routed by role: a stream to its
//! test, a control connection to the test it sets up, a fleet session, a misdirected
//! registration refused.

use crate::config::HANDSHAKE_TIMEOUT;
use crate::shared::Shared;
use crate::unproven::{Stage, UnprovenSlot};
use netblast_wire::wire::{self, HEADER_LEN, Header, Refusal, Role, STREAM_TAG_LEN, Session, StreamAck};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// What a connection showed before it proved itself.
enum Opening {
    /// A stream's header and tag.
    Stream(Header, [u8; STREAM_TAG_LEN]),
    /// A control, fleet or registration connection's header and finished handshake.
    Session(Header, Session),
}

/// Handles one accepted connection to the data port.
/// `unproven` is the connection's place among those that have not proven themselves; it is
/// given back once the connection has (its handshake done, its stream's tag read). Until then
/// the connection is closed when its time to prove itself runs out or when it is the one that
/// makes room for a newer connection (see [`crate::unproven`]).
pub async fn handle(
    mut conn: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    mut unproven: UnprovenSlot,
) {
    let deadline = unproven.deadline;
    let evicted = unproven.evicted();
    let mut role = None;
    let opening = tokio::select! {
        biased;
        why = evicted => Err(Some(why)),
        _ = tokio::time::sleep(deadline) => Err(None),
        opening = first_words(&mut conn, peer, &shared, &unproven, &mut role) => Ok(opening),
    };
    let opening = match opening {
        Ok(Some(opening)) => opening,
        Ok(None) => return,
        Err(None) => {
            let why = format!("did not prove itself within {:.1}s", deadline.as_secs_f64());
            shared.stats.refuse(peer, Refusal::Invalid, &why);
            return;
        }
        Err(Some(crowded)) => return made_room(conn, peer, &shared, role, crowded.words()),
    };
    if unproven.prove().is_err() {
        // Closed to make room at the moment it proved itself.
        let role = match &opening {
            Opening::Stream(..) => Role::Stream,
            Opening::Session(h, _) => h.role,
        };
        let why = "closed to admit a newer connection as it proved itself".to_string();
        return made_room(conn, peer, &shared, Some(role), why);
    }
    match opening {
        Opening::Stream(header, tag) => crate::data::stream_conn(conn, peer, header, tag, &shared).await,
        Opening::Session(header, session) => match header.role {
            // (A stream opens with its tag, never a session.)
            Role::Control | Role::Stream => {
                if let Err(e) = crate::data::control_conn(conn, peer, header.test_id, session, &shared, stop).await {
                    tracing::info!(%peer, test = %header.test_id, "control connection ended: {e}");
                }
            }
            Role::Fleet => {
                if !session.authenticated {
                    let m = "orders need the token: this serve runs without --token-file".to_string();
                    shared.stats.refuse(peer, Refusal::Auth, &m);
                    let _ = conn.write_all(&wire::refusal(Refusal::Auth, m)).await;
                    return;
                }
                conn.set_nodelay(true).ok();
                crate::fleet::session(conn, peer, shared.clone(), stop).await;
            }
            Role::Register => {
                let m = "this is an agent, not a coordinator: register with `netblast fleet --listen`".to_string();
                shared.stats.refuse(peer, Refusal::Invalid, &m);
                let _ = conn.write_all(&wire::refusal(Refusal::Invalid, m)).await;
            }
        },
    }
}

/// A connection closed to make room for a newer one: counted, logged (rate-limited), and told
/// why if it holds a session (a client dials again on that answer, as on a stream or a silent
/// connection simply closed). The words are sent without waiting: a peer that does not read
/// gets no hold on the server.
fn made_room(conn: TcpStream, peer: SocketAddr, shared: &Shared, role: Option<Role>, why: String) {
    shared.stats.refuse(peer, Refusal::Busy, &why);
    if matches!(role, Some(Role::Control | Role::Fleet | Role::Register)) {
        let _ = conn.try_write(&wire::refusal(Refusal::Busy, why));
    }
}

/// Reads what a connection must show before it is proven: its header (a peer that is not
/// netblast is turned away on its first bytes), then a stream's tag or a session's handshake.
/// `None`: refused (answered, logged and counted). `role` is set once the header is read.
async fn first_words(
    conn: &mut TcpStream,
    peer: SocketAddr,
    shared: &Shared,
    unproven: &UnprovenSlot,
    role: &mut Option<Role>,
) -> Option<Opening> {
    let mut hdr = [0u8; HEADER_LEN];
    // The magic first: a peer that is not netblast (an HTTP client, a port scanner) is turned
    // away as soon as its first bytes arrive, not when its time runs out.
    let (magic, rest) = hdr.split_at_mut(wire::MAGIC.len());
    // A peer that closes without a byte is a TCP health probe (kubelet's, a load balancer's):
    // counted, not warned of.
    let read = async {
        if conn.read(&mut magic[..1]).await? == 0 {
            return Ok(false);
        }
        conn.read_exact(&mut magic[1..]).await?;
        if *magic != wire::MAGIC {
            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "not a netblast peer"));
        }
        conn.read_exact(rest).await.map(|_| true)
    };
    match read.await {
        Ok(true) => {}
        Ok(false) => {
            shared.stats.probed(peer);
            return None;
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            let what = if hdr[..4].iter().all(|b| b.is_ascii_uppercase()) {
                "not a netblast peer (it speaks text: an HTTP client on the data port?)"
            } else {
                "not a netblast peer (bad magic)"
            };
            shared.stats.refuse(peer, Refusal::Invalid, what);
            return None;
        }
        Err(_) => {
            shared.stats.refuse(peer, Refusal::Invalid, "closed before a full netblast handshake");
            return None;
        }
    }
    let header = match Header::decode(&hdr) {
        Ok(h) => h,
        Err(e) => {
            shared.stats.refuse(peer, Refusal::Invalid, &e.to_string());
            return None;
        }
    };
    if let Err(e) = header.negotiate() {
        shared.stats.refuse(peer, Refusal::Version, &e.to_string());
        let _ = conn.write_all(&wire::version_refusal(&header, &e)).await;
        return None;
    }
    unproven.reached(Stage::Spoke);
    *role = Some(header.role);
    let allowed = shared.access.allows(peer.ip());
    if header.role == Role::Stream {
        if !allowed {
            shared.stats.refuse(peer, Refusal::NotAllowed, shared.access.refusal());
            let _ = conn.write_all(&[StreamAck::BadTag as u8]).await;
            return None;
        }
        let mut tag = [0u8; STREAM_TAG_LEN];
        if conn.read_exact(&mut tag).await.is_err() {
            shared.stats.refuse(peer, Refusal::Invalid, "stream without its tag");
            return None;
        }
        return Some(Opening::Stream(header, tag));
    }
    let session = handshake(conn, peer, &header, &hdr, allowed, shared).await?;
    Some(Opening::Session(header, session))
}

/// The listening side of the handshake: the dialing side's nonce, the hello, its proof.
/// `None` when the peer was refused (already answered, logged and counted).
pub async fn handshake(
    conn: &mut TcpStream,
    peer: SocketAddr,
    header: &Header,
    hdr: &[u8; HEADER_LEN],
    allowed: bool,
    shared: &Shared,
) -> Option<Session> {
    let not_allowed = (!allowed).then(|| shared.access.refusal());
    let token = shared.access.token.as_ref();
    match tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        wire::nonblocking::server_handshake(conn, header, hdr, token, not_allowed),
    )
    .await
    {
        Ok(Ok(s)) => Some(s),
        Ok(Err(r)) => {
            shared.stats.refuse(peer, r.reason, &r.why);
            None
        }
        Err(_) => {
            shared.stats.refuse(peer, Refusal::Invalid, "handshake not completed in time");
            None
        }
    }
}
