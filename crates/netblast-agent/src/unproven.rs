//! Connections that have not proven themselves yet (their header read, their handshake done,
//! their stream's tag shown), and how a full set of them makes room.
//!
//! A cap that only refused would itself be the denial of service: a stranger holding every
//! place keeps real clients out until its connections time out. So a new connection is always
//! admitted, and when its address or the server is at its cap one connection makes room: of
//! the crowded address (the new one's own, or the address holding the most places), the one
//! that has shown least (silent before one that spoke netblast's header), oldest first. Holding
//! the places then costs a stranger a fresh connection for every connection that arrives after
//! it, and a real client is closed only if as many connections as its address may hold arrive
//! after it before its one round trip of proof. The time to prove shrinks as the places fill:
//! [`proof_deadline`].

use crate::config::{HANDSHAKE_TIMEOUT, Limits};
use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The least time a connection has to prove itself, when every place is taken: one round trip
/// of the slowest path a test crosses, with room to spare.
pub const LEAST_PROOF_TIME: Duration = Duration::from_secs(1);

/// How far a connection has come in proving itself; the least advanced make room first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Stage {
    /// Nothing read yet.
    Silent = 0,
    /// Its netblast header read: it speaks the protocol, its proof is under way.
    Spoke = 1,
}

/// The connections not proven yet, by peer address, oldest first.
#[derive(Debug, Default)]
pub struct Unproven {
    inner: Mutex<Inner>,
    /// Connections closed to make room whose tasks have not closed them yet.
    closing: std::sync::atomic::AtomicUsize,
    /// Notified as each of those closes.
    closed: Notify,
}

/// The most connections closed to make room that may still hold their descriptors: the
/// accept loop takes no more until they are given back ([`Unproven::room_to_accept`]), so the
/// descriptors of the unproven stay within their cap and this many, however fast strangers
/// come (new ones wait in the kernel's listen queue meanwhile).
pub const MOST_CLOSING: usize = 32;

#[derive(Debug, Default)]
struct Inner {
    next_id: u64,
    held: usize,
    /// Connections closed to make room, over the server's life (for [`Unproven::room_to_accept`]'s count).
    evicted: u64,
    by_peer: HashMap<IpAddr, VecDeque<Entry>>,
}

#[derive(Debug)]
struct Entry {
    id: u64,
    state: Arc<SlotState>,
}

/// What one connection's task and the admitting loop share.
#[derive(Debug, Default)]
struct SlotState {
    stage: AtomicU8,
    /// Notified once, when it is closed to make room.
    evicted: Notify,
    /// Which cap made it make room.
    why: std::sync::OnceLock<Crowded>,
}

/// Which cap made a new connection take an older one's place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crowded {
    /// The new connection's address held this many.
    Peer(usize),
    /// All addresses together held this many.
    All(usize),
}

impl Crowded {
    /// Why a connection was closed, in words its peer and the log read.
    pub fn words(self) -> String {
        match self {
            Crowded::Peer(n) => format!(
                "closed to admit a newer connection from its address: it held {n} connections that had not proven themselves (--max-unproven-per-peer)"
            ),
            Crowded::All(n) => format!(
                "closed to admit a newer connection: this server held {n} connections that had not proven themselves, the most it holds (--max-unproven)"
            ),
        }
    }
}

/// The time a connection admitted with `held` others unproven (of at most `cap`) has to prove
/// itself: [`HANDSHAKE_TIMEOUT`] while at most half the places are taken, then less, down to
/// [`LEAST_PROOF_TIME`] when all are.
pub fn proof_deadline(held: usize, cap: usize) -> Duration {
    let half = (cap / 2).max(1);
    if held <= half {
        return HANDSHAKE_TIMEOUT;
    }
    let over = (held - half).min(half) as u32;
    HANDSHAKE_TIMEOUT - (HANDSHAKE_TIMEOUT - LEAST_PROOF_TIME) * over / half as u32
}

impl Unproven {
    /// Admits a connection from `ip`: always, making room within `limits` if it must. Says
    /// which cap made room, if one did.
    pub fn admit(this: &Arc<Unproven>, ip: IpAddr, limits: &Limits) -> (UnprovenSlot, Option<Crowded>) {
        let mut inner = this.inner.lock().unwrap_or_else(|e| e.into_inner());
        let mine = inner.by_peer.get(&ip).map_or(0, VecDeque::len);
        let evicted_before = inner.evicted;
        let crowded = if mine >= limits.unproven_per_peer.max(1) {
            inner.evict_from(ip, Crowded::Peer(mine));
            Some(Crowded::Peer(mine))
        } else if inner.held >= limits.unproven.max(1) {
            let held = inner.held;
            if let Some(most) = inner.by_peer.iter().max_by_key(|(_, q)| q.len()).map(|(ip, _)| *ip) {
                inner.evict_from(most, Crowded::All(held));
            }
            Some(Crowded::All(held))
        } else {
            None
        };
        this.closing.fetch_add((inner.evicted - evicted_before) as usize, Ordering::AcqRel);
        let deadline = proof_deadline(inner.held, limits.unproven.max(1));
        let id = inner.next_id;
        inner.next_id += 1;
        let state = Arc::new(SlotState::default());
        inner.by_peer.entry(ip).or_default().push_back(Entry { id, state: state.clone() });
        inner.held += 1;
        (UnprovenSlot { of: this.clone(), ip, id, state, deadline, released: false }, crowded)
    }

    /// Connections not proven yet, in all.
    pub fn count(&self) -> usize {
        self.inner.lock().map(|i| i.held).unwrap_or(0)
    }

    /// Whether another connection may be accepted now: fewer than [`MOST_CLOSING`]
    /// connections closed to make room still hold their descriptors.
    pub fn room_to_accept(&self) -> bool {
        self.closing.load(Ordering::Acquire) < MOST_CLOSING
    }

    /// Completes when a connection closed to make room has given its descriptor back.
    pub async fn one_closed(&self) {
        self.closed.notified().await
    }
}

impl Inner {
    /// Closes the connection of `ip` that has shown least, the oldest of those.
    fn evict_from(&mut self, ip: IpAddr, why: Crowded) {
        let Some(q) = self.by_peer.get_mut(&ip) else { return };
        let least =
            q.iter().enumerate().min_by_key(|(i, e)| (e.state.stage.load(Ordering::Relaxed), *i)).map(|(i, _)| i);
        if let Some(e) = least.and_then(|i| q.remove(i)) {
            let _ = e.state.why.set(why);
            e.state.evicted.notify_one();
            self.held -= 1;
            self.evicted += 1;
        }
        if q.is_empty() {
            self.by_peer.remove(&ip);
        }
    }

    /// Takes connection `id` of `ip` out; false if it was not there (closed to make room).
    fn release(&mut self, ip: IpAddr, id: u64) -> bool {
        let Some(q) = self.by_peer.get_mut(&ip) else { return false };
        let found = q.iter().position(|e| e.id == id).and_then(|i| q.remove(i)).is_some();
        if found {
            self.held -= 1;
        }
        if q.is_empty() {
            self.by_peer.remove(&ip);
        }
        found
    }
}

/// The connection was closed to make room before it proved itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Evicted;

/// One connection's place among the unproven, given back when it proves itself or closes.
#[derive(Debug)]
pub struct UnprovenSlot {
    of: Arc<Unproven>,
    ip: IpAddr,
    id: u64,
    state: Arc<SlotState>,
    /// The time it has to prove itself, from its admission.
    pub deadline: Duration,
    released: bool,
}

impl UnprovenSlot {
    /// Marks how far it has come: the least advanced make room first.
    pub fn reached(&self, stage: Stage) {
        self.state.stage.store(stage as u8, Ordering::Relaxed);
    }

    /// Completes when the connection is closed to make room (at once if it already was), with
    /// the cap that made it.
    pub fn evicted(&self) -> impl std::future::Future<Output = Crowded> + Send + 'static + use<> {
        let state = self.state.clone();
        async move {
            state.evicted.notified().await;
            // Set before the notice.
            state.why.get().copied().unwrap_or(Crowded::All(0))
        }
    }

    /// It proved itself: its place is given back and nothing can close it to make room any
    /// more. [`Evicted`] if it was closed to make room first (the slot is then to be dropped
    /// after the connection is closed).
    pub fn prove(&mut self) -> Result<(), Evicted> {
        let mut inner = self.of.inner.lock().unwrap_or_else(|e| e.into_inner());
        self.released = inner.release(self.ip, self.id);
        self.released.then_some(()).ok_or(Evicted)
    }
}

impl Drop for UnprovenSlot {
    /// Its place given back; if it was closed to make room, its descriptor is counted as
    /// given back too (the connection is dropped before its slot).
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let found = self.of.inner.lock().unwrap_or_else(|e| e.into_inner()).release(self.ip, self.id);
        if !found {
            self.of.closing.fetch_sub(1, Ordering::AcqRel);
            self.of.closed.notify_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(all: usize, per_peer: usize) -> Limits {
        Limits { unproven: all, unproven_per_peer: per_peer, ..Default::default() }
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn is_evicted(s: &UnprovenSlot) -> bool {
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        std::pin::pin!(s.evicted()).poll(&mut cx).is_ready()
    }

    use std::future::Future;

    #[test]
    fn an_address_at_its_cap_makes_room_from_its_own_oldest() {
        let u: Arc<Unproven> = Default::default();
        let l = limits(10, 3);
        let a: Vec<_> = (0..3).map(|_| Unproven::admit(&u, ip("127.0.0.2"), &l).0).collect();
        let other = Unproven::admit(&u, ip("127.0.0.3"), &l).0;
        let (fourth, crowded) = Unproven::admit(&u, ip("127.0.0.2"), &l);
        assert_eq!(crowded, Some(Crowded::Peer(3)));
        assert!(is_evicted(&a[0]), "its oldest made room");
        assert!(!is_evicted(&a[1]) && !is_evicted(&a[2]) && !is_evicted(&other) && !is_evicted(&fourth));
        assert_eq!(u.count(), 4);
        let mut a = a.into_iter();
        assert!(!u.room_to_accept() || MOST_CLOSING > 1);
        assert_eq!(u.closing.load(Ordering::Relaxed), 1, "one closing");
        let mut first = a.next().unwrap();
        assert_eq!(first.prove(), Err(Evicted), "closed to make room: not proven");
        drop(first);
        assert_eq!(u.closing.load(Ordering::Relaxed), 0, "its descriptor given back");
        assert_eq!(a.next().unwrap().prove(), Ok(()));
        assert_eq!(u.count(), 3);
    }

    #[test]
    fn a_full_server_makes_room_from_the_address_holding_most() {
        // A client with one connection pending beside a stranger holding the rest is never the
        // one closed: the stranger's address holds the most.
        let u: Arc<Unproven> = Default::default();
        let l = limits(6, 32);
        let client = Unproven::admit(&u, ip("127.0.0.1"), &l).0;
        let stranger: Vec<_> =
            (0..5).map(|i| Unproven::admit(&u, ip(&format!("127.0.0.{}", 2 + i % 2)), &l).0).collect();
        for _ in 0..20 {
            let (s, crowded) = Unproven::admit(&u, ip("127.0.0.2"), &l);
            assert!(matches!(crowded, Some(Crowded::All(6))), "{crowded:?}");
            assert!(!is_evicted(&client));
            std::mem::forget(s);
        }
        assert_eq!(u.count(), 6);
        assert!(is_evicted(&stranger[0]), "the oldest of the most crowded address went first");
        let mut client = client;
        assert_eq!(client.prove(), Ok(()));
        assert_eq!(u.closing.load(Ordering::Relaxed), 20, "the closed ones still hold their descriptors");
        assert!(!u.room_to_accept() || MOST_CLOSING > 20);
        drop(stranger);
        assert_eq!(u.closing.load(Ordering::Relaxed), 17, "the 3 of 127.0.0.2 given back; 17 were forgotten");
    }

    #[test]
    fn a_connection_that_spoke_outlives_silent_ones() {
        let u: Arc<Unproven> = Default::default();
        let l = limits(10, 3);
        let spoke = Unproven::admit(&u, ip("127.0.0.1"), &l).0;
        spoke.reached(Stage::Spoke);
        let silent: Vec<_> = (0..2).map(|_| Unproven::admit(&u, ip("127.0.0.1"), &l).0).collect();
        let _newer = Unproven::admit(&u, ip("127.0.0.1"), &l).0;
        assert!(!is_evicted(&spoke), "older, but it spoke: a silent one made room");
        assert!(is_evicted(&silent[0]));
    }

    #[test]
    fn the_time_to_prove_shrinks_as_places_fill() {
        assert_eq!(proof_deadline(0, 256), HANDSHAKE_TIMEOUT);
        assert_eq!(proof_deadline(128, 256), HANDSHAKE_TIMEOUT);
        assert_eq!(proof_deadline(192, 256), (HANDSHAKE_TIMEOUT + LEAST_PROOF_TIME) / 2);
        assert_eq!(proof_deadline(256, 256), LEAST_PROOF_TIME);
        assert_eq!(proof_deadline(1000, 256), LEAST_PROOF_TIME);
        assert_eq!(proof_deadline(1, 1), HANDSHAKE_TIMEOUT);
    }

    #[test]
    fn a_dropped_slot_gives_its_place_back() {
        let u: Arc<Unproven> = Default::default();
        let l = limits(2, 2);
        let s = Unproven::admit(&u, ip("::1"), &l).0;
        assert_eq!(u.count(), 1);
        drop(s);
        assert_eq!(u.count(), 0);
        let (_a, none) = Unproven::admit(&u, ip("::1"), &l);
        assert_eq!(none, None);
    }
}
