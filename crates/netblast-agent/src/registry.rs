//! Tests that are set up but not yet started, by id: where stream connections find their test.

use netblast_spec::auth::StreamKey;
use netblast_spec::profile::Way;
use netblast_spec::wire::{StreamAck, TestId};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// An accepted stream: id, TCP socket, and the UDP socket of a UDP flow or the listener of a
/// cps flow.
pub type Accepted = (u32, std::net::TcpStream, Option<std::net::UdpSocket>, Option<std::net::TcpListener>);

/// What each stream of a test sets up besides its TCP connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// Nothing: the stream carries the data.
    None,
    /// A UDP socket connected to the client's.
    Udp,
    /// A UDP socket in the test's `SO_REUSEPORT` group: one port for all its flows (per-CPU
    /// receivers).
    UdpGroup,
    /// A listener for the flow's connections (cps).
    Listener,
}

/// Where an accepted stream goes: to its test's control task.
pub type StreamTx = UnboundedSender<Accepted>;

/// A test waiting for its streams.
#[derive(Debug)]
pub struct TestEntry {
    ways: HashMap<u32, Way>,
    connected: HashSet<u32>,
    extra: Extra,
    key: StreamKey,
    tx: StreamTx,
    /// The port of the test's UDP group, once its first socket is bound.
    group_port: Option<u16>,
}

impl TestEntry {
    /// A test expecting the streams in `ways` (each setting up `extra`), each tagged with `key`
    /// (known only to the connection that set the test up), delivered through `tx`.
    pub fn new(ways: HashMap<u32, Way>, extra: Extra, key: StreamKey, tx: StreamTx) -> TestEntry {
        TestEntry { ways, connected: HashSet::new(), extra, key, tx, group_port: None }
    }
}

/// The registry's answer to a stream header.
#[derive(Debug)]
pub struct Offer {
    /// What to answer.
    pub ack: StreamAck,
    /// Where to deliver the stream, when accepted.
    pub tx: Option<StreamTx>,
    /// What the stream sets up besides its TCP connection.
    pub extra: Extra,
}

/// The tests of one server. Locked only on connection setup, never on the data path.
#[derive(Debug)]
pub struct Registry {
    tests: Mutex<HashMap<TestId, (TestEntry, IpAddr)>>,
    max_pending: usize,
    max_per_peer: usize,
}

impl Registry {
    /// An empty registry that holds at most `max_pending` tests waiting to start, at most
    /// `max_per_peer` of them from one peer address.
    pub fn new(max_pending: usize, max_per_peer: usize) -> Registry {
        Registry { tests: Mutex::new(HashMap::new()), max_pending, max_per_peer }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TestId, (TestEntry, IpAddr)>> {
        self.tests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a test of `peer`; refuses a duplicate id, too many waiting tests, or too many
    /// from that peer. The entry lives as long as the returned guard: only the connection that
    /// set a test up can forget it.
    pub fn insert(
        self: &std::sync::Arc<Self>,
        id: TestId,
        peer: IpAddr,
        entry: TestEntry,
    ) -> Result<Registered, String> {
        let mut t = self.lock();
        if t.contains_key(&id) {
            return Err(format!("test id {id} is already in use"));
        }
        if t.len() >= self.max_pending {
            return Err(format!("server busy: {} tests are waiting to start (limit {})", t.len(), self.max_pending));
        }
        let mine = t.values().filter(|(_, p)| *p == peer).count();
        if mine >= self.max_per_peer {
            return Err(format!(
                "{mine} tests from {peer} are waiting to start: the most one peer may set up at once (--max-pending-per-peer)"
            ));
        }
        t.insert(id, (entry, peer));
        Ok(Registered { reg: self.clone(), id })
    }

    /// Number of tests waiting to start.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// Matches a stream connection to its test by id and tag. Returns the ack to send and,
    /// when accepted, where to deliver the socket.
    pub fn offer_stream(&self, id: &TestId, stream: u32, tag: &[u8]) -> Offer {
        let mut t = self.lock();
        let refuse = |ack| Offer { ack, tx: None, extra: Extra::None };
        let Some((entry, _)) = t.get_mut(id) else { return refuse(StreamAck::UnknownTest) };
        if !entry.key.verify(&id.0, stream, tag) {
            return refuse(StreamAck::BadTag);
        }
        if !entry.ways.contains_key(&stream) || !entry.connected.insert(stream) {
            return refuse(StreamAck::UnknownStream);
        }
        Offer { ack: StreamAck::Ok, tx: Some(entry.tx.clone()), extra: entry.extra }
    }

    /// A socket of test `id`'s UDP group on `ip`: the first takes a free port, the others join
    /// it (under the lock, so concurrent streams agree on one port).
    pub fn udp_group_socket(&self, id: &TestId, ip: IpAddr) -> std::io::Result<std::net::UdpSocket> {
        let mut t = self.lock();
        let Some((entry, _)) = t.get_mut(id) else {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "the test is gone"));
        };
        let sock = netblast_engine::sockopt::udp_group_on(ip, entry.group_port)?;
        entry.group_port = Some(sock.local_addr()?.port());
        Ok(sock)
    }
}

/// A test's place in the registry, held by the connection that set it up; dropping it
/// forgets the test.
#[derive(Debug)]
pub struct Registered {
    reg: std::sync::Arc<Registry>,
    id: TestId,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.reg.lock().remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_match_their_test_once_and_only_with_its_tag() {
        use netblast_spec::auth::Transcript;
        let r = std::sync::Arc::new(Registry::new(3, 2));
        let me: IpAddr = "127.0.0.1".parse().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let key = Transcript { header: [0; 32], client_nonce: [1; 32], server_nonce: [2; 32] }.stream_key(None);
        let other = Transcript { header: [0; 32], client_nonce: [3; 32], server_nonce: [2; 32] }.stream_key(None);
        let id = TestId([1; 16]);
        let entry = |tx| TestEntry::new(HashMap::from([(0, Way::Up)]), Extra::None, key, tx);
        let guard = r.insert(id, me, entry(tx.clone())).unwrap();
        assert!(r.insert(id, me, entry(tx.clone())).is_err(), "a second set-up with the same id is refused");
        assert_eq!(r.pending(), 1, "and the refused one did not remove the first");
        assert_eq!(r.offer_stream(&id, 0, &other.tag(&id.0, 0)).ack, StreamAck::BadTag);
        assert_eq!(r.offer_stream(&id, 0, &key.tag(&id.0, 0)).ack, StreamAck::Ok);
        assert_eq!(r.offer_stream(&id, 0, &key.tag(&id.0, 0)).ack, StreamAck::UnknownStream, "a stream connects once");
        assert_eq!(r.offer_stream(&id, 7, &key.tag(&id.0, 7)).ack, StreamAck::UnknownStream);
        assert_eq!(r.offer_stream(&TestId([2; 16]), 0, &[0; 16]).ack, StreamAck::UnknownTest);
        let _g3 = r.insert(TestId([3; 16]), me, entry(tx.clone())).unwrap();
        let e = r.insert(TestId([4; 16]), me, entry(tx.clone())).unwrap_err();
        assert!(e.contains("127.0.0.1") && e.contains("one peer"), "{e}");
        let other: IpAddr = "127.0.0.2".parse().unwrap();
        let _g5 = r.insert(TestId([5; 16]), other, entry(tx.clone())).unwrap();
        assert!(r.insert(TestId([6; 16]), other, entry(tx)).unwrap_err().contains("busy"));
        drop(guard);
        assert_eq!(r.pending(), 2);
    }

    #[test]
    fn a_test_s_udp_group_sockets_share_one_port() {
        use netblast_spec::auth::Transcript;
        let r = std::sync::Arc::new(Registry::new(4, 4));
        let me: IpAddr = "127.0.0.1".parse().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let key = Transcript { header: [0; 32], client_nonce: [1; 32], server_nonce: [2; 32] }.stream_key(None);
        let entry = |tx| TestEntry::new(HashMap::from([(0, Way::Up), (1, Way::Up)]), Extra::UdpGroup, key, tx);
        let (a, b) = (TestId([1; 16]), TestId([2; 16]));
        let _ga = r.insert(a, me, entry(tx.clone())).unwrap();
        let _gb = r.insert(b, me, entry(tx)).unwrap();
        let port = |s: &std::net::UdpSocket| s.local_addr().unwrap().port();
        let (a0, a1) = (r.udp_group_socket(&a, me).unwrap(), r.udp_group_socket(&a, me).unwrap());
        let b0 = r.udp_group_socket(&b, me).unwrap();
        assert_eq!(port(&a0), port(&a1));
        assert_ne!(port(&a0), port(&b0), "another test's group has its own port");
        assert!(r.udp_group_socket(&TestId([9; 16]), me).is_err());
    }
}
