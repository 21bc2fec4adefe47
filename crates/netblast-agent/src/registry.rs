//! Tests that are set up but not yet started, by id: where stream connections find their test.

use netblast_spec::profile::Way;
use netblast_spec::wire::{StreamAck, TestId};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use tokio::sync::mpsc::UnboundedSender;

/// Where an accepted stream socket goes: to its test's control task.
pub type StreamTx = UnboundedSender<(u32, std::net::TcpStream)>;

/// A test waiting for its streams.
#[derive(Debug)]
pub struct TestEntry {
    ways: HashMap<u32, Way>,
    connected: HashSet<u32>,
    tx: StreamTx,
}

impl TestEntry {
    /// A test expecting the streams in `ways`, delivered through `tx`.
    pub fn new(ways: HashMap<u32, Way>, tx: StreamTx) -> TestEntry {
        TestEntry { ways, connected: HashSet::new(), tx }
    }
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
    pub fn offer_stream(&self, id: &TestId, stream: u32) -> (StreamAck, Option<StreamTx>) {
        let mut t = self.lock();
        let Some(entry) = t.get_mut(id) else { return (StreamAck::UnknownTest, None) };
        if !entry.ways.contains_key(&stream) || !entry.connected.insert(stream) {
            return (StreamAck::UnknownStream, None);
        }
        (StreamAck::Ok, Some(entry.tx.clone()))
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
        r.insert(id, TestEntry::new(HashMap::from([(0, Way::Up)]), tx.clone())).unwrap();
        assert!(r.insert(id, TestEntry::new(HashMap::new(), tx.clone())).is_err());
        assert_eq!(r.offer_stream(&id, 0).0, StreamAck::Ok);
        assert_eq!(r.offer_stream(&id, 0).0, StreamAck::UnknownStream, "a stream connects once");
        assert_eq!(r.offer_stream(&id, 7).0, StreamAck::UnknownStream);
        assert_eq!(r.offer_stream(&TestId([2; 16]), 0).0, StreamAck::UnknownTest);
        r.insert(TestId([3; 16]), TestEntry::new(HashMap::new(), tx.clone())).unwrap();
        assert!(r.insert(TestId([4; 16]), TestEntry::new(HashMap::new(), tx)).unwrap_err().contains("busy"));
        r.remove(&id);
        assert_eq!(r.pending(), 1);
    }
}
