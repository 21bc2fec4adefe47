//! Tests that are set up but not yet started, by id: where stream connections find their test.

use netblast_spec::profile::Way;
use netblast_spec::wire::{StreamAck, TestId};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// An accepted stream: id, TCP socket, and the UDP socket of a UDP flow.
pub type Accepted = (u32, std::net::TcpStream, Option<std::net::UdpSocket>);

/// Where an accepted stream goes: to its test's control task.
pub type StreamTx = UnboundedSender<Accepted>;

/// A test waiting for its streams.
#[derive(Debug)]
pub struct TestEntry {
    ways: HashMap<u32, Way>,
    connected: HashSet<u32>,
    udp: bool,
    tx: StreamTx,
}

impl TestEntry {
    /// A test expecting the streams in `ways` (UDP flows when `udp`), delivered through `tx`.
    pub fn new(ways: HashMap<u32, Way>, udp: bool, tx: StreamTx) -> TestEntry {
        TestEntry { ways, connected: HashSet::new(), udp, tx }
    }
}

/// The registry's answer to a stream header.
#[derive(Debug)]
pub struct Offer {
    /// What to answer.
    pub ack: StreamAck,
    /// Where to deliver the stream, when accepted.
    pub tx: Option<StreamTx>,
    /// Whether the stream sets up a UDP flow.
    pub udp: bool,
}

/// The tests of one server. Locked only on connection setup, never on the data path.
#[derive(Debug)]
pub struct Registry {
    tests: Mutex<HashMap<TestId, TestEntry>>,
    max_pending: usize,
}

impl Registry {
    /// An empty registry that holds at most `max_pending` tests waiting to start.
    pub fn new(max_pending: usize) -> Registry {
        Registry { tests: Mutex::new(HashMap::new()), max_pending }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<TestId, TestEntry>> {
        self.tests.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a test; refuses a duplicate id or too many waiting tests.
    pub fn insert(&self, id: TestId, entry: TestEntry) -> Result<(), String> {
        let mut t = self.lock();
        if t.contains_key(&id) {
            return Err(format!("test id {id} is already in use"));
        }
        if t.len() >= self.max_pending {
            return Err(format!("server busy: {} tests are waiting to start", t.len()));
        }
        t.insert(id, entry);
        Ok(())
    }

    /// Forgets a test (started, or its control connection ended).
    pub fn remove(&self, id: &TestId) {
        self.lock().remove(id);
    }

    /// Number of tests waiting to start.
    pub fn pending(&self) -> usize {
        self.lock().len()
    }

    /// Matches a stream connection to its test. Returns the ack to send and, when accepted,
    /// where to deliver the socket.
    pub fn offer_stream(&self, id: &TestId, stream: u32) -> Offer {
        let mut t = self.lock();
        let refuse = |ack| Offer { ack, tx: None, udp: false };
        let Some(entry) = t.get_mut(id) else { return refuse(StreamAck::UnknownTest) };
        if !entry.ways.contains_key(&stream) || !entry.connected.insert(stream) {
            return refuse(StreamAck::UnknownStream);
        }
        Offer { ack: StreamAck::Ok, tx: Some(entry.tx.clone()), udp: entry.udp }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_match_their_test_once() {
        let r = Registry::new(2);
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let id = TestId([1; 16]);
        r.insert(id, TestEntry::new(HashMap::from([(0, Way::Up)]), false, tx.clone())).unwrap();
        assert!(r.insert(id, TestEntry::new(HashMap::new(), false, tx.clone())).is_err());
        assert_eq!(r.offer_stream(&id, 0).ack, StreamAck::Ok);
        assert_eq!(r.offer_stream(&id, 0).ack, StreamAck::UnknownStream, "a stream connects once");
        assert_eq!(r.offer_stream(&id, 7).ack, StreamAck::UnknownStream);
        assert_eq!(r.offer_stream(&TestId([2; 16]), 0).ack, StreamAck::UnknownTest);
        r.insert(TestId([3; 16]), TestEntry::new(HashMap::new(), false, tx.clone())).unwrap();
        assert!(r.insert(TestId([4; 16]), TestEntry::new(HashMap::new(), false, tx)).unwrap_err().contains("busy"));
        r.remove(&id);
        assert_eq!(r.pending(), 1);
    }
}
