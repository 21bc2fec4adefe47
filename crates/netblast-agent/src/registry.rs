//! Tests that are set up but not yet started, by id: where stream connections find their test.

use netblast_spec::profile::{TcpSection, Way};
use netblast_wire::auth::StreamKey;
use netblast_wire::wire::{StreamAck, TestId};
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

/// How a test's UDP sockets are made ready when opened, before the client may send (its
/// first datagrams can arrive before the test's workers exist).
#[derive(Debug, Clone, Default)]
pub struct UdpReady {
    /// The test's socket options: its buffer sizes (`-w`) apply to the datagram socket.
    pub tcp: TcpSection,
    /// Per-CPU receivers: the CPU each stream's receiver is pinned to, which its socket is
    /// tied to.
    pub cpus: HashMap<u32, usize>,
}

impl UdpReady {
    /// Readies stream `stream`'s datagram socket: buffers, and the CPU it is tied to.
    pub fn apply(&self, sock: &std::net::UdpSocket, stream: u32) -> std::io::Result<()> {
        netblast_engine::os::sockopt::ready_udp(sock, &self.tcp)?;
        match self.cpus.get(&stream) {
            Some(&cpu) => netblast_engine::os::sockopt::tie_to_cpu(sock, cpu),
            None => Ok(()),
        }
    }
}

/// Where an accepted stream goes: to its test's control task.
pub type StreamTx = UnboundedSender<Accepted>;

/// A test waiting for its streams.
#[derive(Debug)]
pub struct TestEntry {
    ways: HashMap<u32, Way>,
    connected: HashSet<u32>,
    extra: Extra,
    udp: std::sync::Arc<UdpReady>,
    key: StreamKey,
    tx: StreamTx,
    /// The port of the test's UDP group, once its first socket is bound.
    group_port: Option<u16>,
}

impl TestEntry {
    /// A test expecting the streams in `ways` (each setting up `extra`), each tagged with `key`
    /// (known only to the connection that set the test up), delivered through `tx`.
    pub fn new(ways: HashMap<u32, Way>, extra: Extra, key: StreamKey, tx: StreamTx) -> TestEntry {
        let udp = std::sync::Arc::new(UdpReady::default());
        TestEntry { ways, connected: HashSet::new(), extra, udp, key, tx, group_port: None }
    }

    /// How the test's UDP sockets are readied when opened (default: the grown receive queue).
    pub fn with_udp(self, udp: UdpReady) -> TestEntry {
        TestEntry { udp: std::sync::Arc::new(udp), ..self }
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
    /// How its UDP socket is readied, for a UDP flow.
    pub udp: std::sync::Arc<UdpReady>,
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
        let refuse = |ack| Offer { ack, tx: None, extra: Extra::None, udp: Default::default() };
        let Some((entry, _)) = t.get_mut(id) else { return refuse(StreamAck::UnknownTest) };
        if !entry.key.verify(&id.0, stream, tag) {
            return refuse(StreamAck::BadTag);
        }
        if !entry.ways.contains_key(&stream) || !entry.connected.insert(stream) {
            return refuse(StreamAck::UnknownStream);
        }
        Offer { ack: StreamAck::Ok, tx: Some(entry.tx.clone()), extra: entry.extra, udp: entry.udp.clone() }
    }

    /// A socket of test `id`'s UDP group on `ip`: the first takes a free port, the others join
    /// it (under the lock, so concurrent streams agree on one port).
    pub fn udp_group_socket(
        &self,
        id: &TestId,
        at: std::net::SocketAddr,
        device: Option<&str>,
        ports: netblast_engine::os::sockopt::FlowPorts,
    ) -> std::io::Result<std::net::UdpSocket> {
        let mut t = self.lock();
        let Some((entry, _)) = t.get_mut(id) else {
            return Err(std::io::Error::new(std::io::ErrorKind::NotFound, "the test is gone"));
        };
        let sock = netblast_engine::os::sockopt::udp_group_on(at, entry.group_port, device, ports)?;
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
        use netblast_wire::auth::Transcript;
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
        use netblast_wire::auth::Transcript;
        let r = std::sync::Arc::new(Registry::new(4, 4));
        let me: IpAddr = "127.0.0.1".parse().unwrap();
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let key = Transcript { header: [0; 32], client_nonce: [1; 32], server_nonce: [2; 32] }.stream_key(None);
        let entry = |tx| TestEntry::new(HashMap::from([(0, Way::Up), (1, Way::Up)]), Extra::UdpGroup, key, tx);
        let (a, b) = (TestId([1; 16]), TestId([2; 16]));
        let _ga = r.insert(a, me, entry(tx.clone())).unwrap();
        let _gb = r.insert(b, me, entry(tx)).unwrap();
        let port = |s: &std::net::UdpSocket| s.local_addr().unwrap().port();
        let (a0, a1) = (
            r.udp_group_socket(&a, (me, 0).into(), None, None).unwrap(),
            r.udp_group_socket(&a, (me, 0).into(), None, None).unwrap(),
        );
        let b0 = r.udp_group_socket(&b, (me, 0).into(), None, None).unwrap();
        assert_eq!(port(&a0), port(&a1));
        assert_ne!(port(&a0), port(&b0), "another test's group has its own port");
        assert!(r.udp_group_socket(&TestId([9; 16]), (me, 0).into(), None, None).is_err());
    }

    #[test]
    fn udp_sockets_are_ready_when_opened() {
        use std::os::fd::AsRawFd;
        let incoming_cpu = |s: &std::net::UdpSocket| socket2::SockRef::from(s).cpu_affinity().unwrap() as isize;
        let me: IpAddr = "127.0.0.1".parse().unwrap();
        let ready = UdpReady { tcp: TcpSection::default(), cpus: HashMap::from([(1, 0)]) };
        let (a, b) = (
            netblast_engine::os::sockopt::udp_on(me, None).unwrap(),
            netblast_engine::os::sockopt::udp_on(me, None).unwrap(),
        );
        ready.apply(&a, 1).unwrap();
        ready.apply(&b, 2).unwrap();
        assert_eq!(incoming_cpu(&a), 0, "stream 1's receiver is tied to its CPU");
        assert_eq!(incoming_cpu(&b), -1, "a stream without a CPU is not tied");
        // 8 MiB as root (past net.core.rmem_max), else up to rmem_max.
        let rmem_max: u64 = std::fs::read_to_string("/proc/sys/net/core/rmem_max").unwrap().trim().parse().unwrap();
        let queue = netblast_engine::os::sockopt::rcvbuf_of(a.as_raw_fd()).unwrap();
        let least = netblast_engine::os::sockopt::UDP_RCVBUF.min(rmem_max);
        assert!(queue >= least, "the receive queue is grown at open: {queue} < {least}");
        // `-w` sets both buffers instead.
        let w = UdpReady {
            tcp: TcpSection { window: Some(netblast_spec::units::ByteSize(64 * 1024)), ..Default::default() },
            cpus: HashMap::new(),
        };
        w.apply(&b, 2).unwrap();
        assert_eq!(netblast_engine::os::sockopt::rcvbuf_of(b.as_raw_fd()).unwrap(), 64 * 1024);
    }
}
