//! One accepted connection to the data port: its header read (a peer that is not netblast is
//! turned away on its first bytes), its version checked, then routed by role: a stream to its
//! test, a control connection to the test it sets up, a fleet session, a misdirected
//! registration refused.

use crate::config::HANDSHAKE_TIMEOUT;
use crate::shared::{Shared, UnprovenSlot};
use netblast_wire::wire::{self, Header, Refusal, Role, Session, StreamAck, HEADER_LEN};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::watch;

/// Handles one accepted connection to the data port.
/// `unproven` is the connection's place among those that have not proven themselves; it is
/// given back once the connection has (its handshake done, its stream handed to its test).
pub async fn handle(
    mut conn: TcpStream,
    peer: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    unproven: UnprovenSlot,
) {
    let mut hdr = [0u8; HEADER_LEN];
    // The magic first: a peer that is not netblast (an HTTP client, a port scanner) is turned
    // away as soon as its first bytes arrive, not when the handshake times out.
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
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, read).await {
        Ok(Ok(false)) => {
            shared.stats.probed(peer);
            return;
        }
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => {
            let what = if hdr[..4].iter().all(|b| b.is_ascii_uppercase()) {
                "not a netblast peer (it speaks text: an HTTP client on the data port?)"
            } else {
                "not a netblast peer (bad magic)"
            };
            shared.stats.refuse(peer, Refusal::Invalid, what);
            return;
        }
        Ok(Ok(true)) => {}
        Ok(Err(_)) => {
            shared.stats.refuse(peer, Refusal::Invalid, "closed before a full netblast handshake");
            return;
        }
        Err(_) => {
            shared.stats.refuse(
                peer,
                Refusal::Invalid,
                &format!("no netblast handshake within {}s", HANDSHAKE_TIMEOUT.as_secs()),
            );
            return;
        }
    }
    let header = match Header::decode(&hdr) {
        Ok(h) => h,
        Err(e) => {
            shared.stats.refuse(peer, Refusal::Invalid, &e.to_string());
            return;
        }
    };
    if let Err(e) = header.negotiate() {
        shared.stats.refuse(peer, Refusal::Version, &e.to_string());
        let _ = conn.write_all(&wire::version_refusal(&header, &e)).await;
        return;
    }
    let allowed = shared.access.allows(peer.ip());
    match header.role {
        Role::Stream => {
            if !allowed {
                shared.stats.refuse(peer, Refusal::NotAllowed, shared.access.refusal());
                let _ = conn.write_all(&[StreamAck::BadTag as u8]).await;
                return;
            }
            crate::data::stream_conn(conn, peer, header, &shared, unproven).await
        }
        Role::Control => {
            let Some(session) = handshake(&mut conn, peer, &header, &hdr, allowed, &shared).await else { return };
            drop(unproven);
            if let Err(e) = crate::data::control_conn(conn, peer, header.test_id, session, &shared, stop).await {
                tracing::info!(%peer, test = %header.test_id, "control connection ended: {e}");
            }
        }
        Role::Fleet => {
            let Some(session) = handshake(&mut conn, peer, &header, &hdr, allowed, &shared).await else { return };
            drop(unproven);
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
            let Some(_session) = handshake(&mut conn, peer, &header, &hdr, allowed, &shared).await else { return };
            let m = "this is an agent, not a coordinator: register with `netblast fleet --listen`".to_string();
            shared.stats.refuse(peer, Refusal::Invalid, &m);
            let _ = conn.write_all(&wire::refusal(Refusal::Invalid, m)).await;
        }
    }
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
