//! Sequenced UDP datagrams: the 16-byte header senders write (sequence number, send time) and
//! what receivers make of it: loss, reordering, duplicates and RFC 3550 jitter.
//!
//! Header, little endian: bytes 0..8 the flow's sequence number (from 0), 8..16 the send time
//! in ns since the test's start on the sender's clock, 16..24 the test's identity (from its
//! random id, which only the two ends know). Only differences of transit times enter the
//! jitter, so the two ends' clocks need not agree.
//!
//! A datagram without the test's identity, or whose sequence number is past any plausible
//! loss ([`PLAUSIBLE_JUMP`] beyond the highest seen), is foreign: a forged or stray datagram
//! that reached the socket. It is counted apart and changes no figure (before, one datagram
//! with sequence number 2^40 made a run lose 1.1 × 10^12 datagrams).

use netblast_spec::result::UdpQuality;

/// Bytes of the header.
pub const HEADER: usize = 24;

/// The most sequence numbers a datagram may be ahead of the highest seen: 2^32 lost in a row
/// is 7 minutes of total loss at 10 million datagrams a second; past it a datagram is foreign.
pub const PLAUSIBLE_JUMP: u64 = 1 << 32;

/// The identity a test's datagrams carry, from its 16-byte random id.
pub fn identity(test_id: &[u8; 16]) -> u64 {
    let (a, b) = test_id.split_at(8);
    let a = u64::from_le_bytes(a.try_into().unwrap_or_default());
    let b = u64::from_le_bytes(b.try_into().unwrap_or_default());
    a ^ b.rotate_left(29)
}

/// Sequence numbers remembered behind the highest, to tell a duplicate from a late datagram.
const WINDOW: u64 = 1 << 16;

/// Writes the header of test `id` into the first [`HEADER`] bytes of `buf`.
#[inline]
pub fn write_header(buf: &mut [u8], seq: u64, sent_ns: u64, id: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&sent_ns.to_le_bytes());
    buf[16..24].copy_from_slice(&id.to_le_bytes());
}

/// Reads the header of a datagram of test `id`: its sequence number and send time; `None` for
/// a datagram too short to carry one or without the test's identity (foreign).
#[inline]
pub fn read_header(buf: &[u8], id: u64) -> Option<(u64, u64)> {
    let word = |at: usize| buf.get(at..at + 8).and_then(|b| b.try_into().ok()).map(u64::from_le_bytes);
    (word(16)? == id).then_some(())?;
    Some((word(0)?, word(8)?))
}

/// A receiver's running account of one flow's sequenced datagrams.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    /// One past the highest sequence number seen (0: none yet).
    next: u64,
    received: u64,
    out_of_order: u64,
    duplicates: u64,
    /// Bit `seq % WINDOW`: whether `seq` (within the window behind `next`) arrived.
    seen: Vec<u64>,
    jitter_ns: f64,
    last_transit: Option<i128>,
}

impl Default for SeqTracker {
    fn default() -> Self {
        SeqTracker {
            next: 0,
            received: 0,
            out_of_order: 0,
            duplicates: 0,
            seen: vec![0; (WINDOW / 64) as usize],
            jitter_ns: 0.0,
            last_transit: None,
        }
    }
}

impl SeqTracker {
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1u64 << (i % 64))
    }

    /// Accounts one datagram: its header and when it arrived (ns since this end's start).
    /// False, and nothing accounted, for a sequence number past [`PLAUSIBLE_JUMP`] (foreign).
    pub fn on_datagram(&mut self, seq: u64, sent_ns: u64, recv_ns: u64) -> bool {
        if seq >= self.next.saturating_add(PLAUSIBLE_JUMP) {
            return false;
        }
        if seq >= self.next {
            // New highest: forget the window slots the advance reuses.
            let advance = seq + 1 - self.next;
            if advance >= WINDOW {
                self.seen.iter_mut().for_each(|w| *w = 0);
            } else {
                for s in self.next..=seq {
                    let (w, b) = self.bit(s);
                    *w &= !b;
                }
            }
            self.next = seq + 1;
        } else if self.next - seq > WINDOW {
            // Too old to tell: counted as received out of order.
            self.out_of_order += 1;
            self.received += 1;
            return true;
        } else {
            let (w, b) = self.bit(seq);
            if *w & b != 0 {
                self.duplicates += 1;
                return true;
            }
            self.out_of_order += 1;
        }
        let (w, b) = self.bit(seq);
        *w |= b;
        self.received += 1;
        // RFC 3550 6.4.1: J += (|D| - J) / 16 over successive arrivals.
        let transit = recv_ns as i128 - sent_ns as i128;
        if let Some(prev) = self.last_transit {
            let d = (transit - prev).unsigned_abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit = Some(transit);
        true
    }

    /// The account so far (cumulative; `lost` = sequence numbers up to the highest seen that
    /// did not arrive).
    pub fn total(&self) -> UdpQuality {
        UdpQuality {
            lost: self.next as i64 - self.received as i64,
            out_of_order: self.out_of_order,
            duplicates: self.duplicates,
            jitter_ns: self.jitter_ns,
            received: self.received,
            foreign: 0,
        }
    }
}

/// A receiver's accounts: one for a flow's own connected socket, or one per sender for a
/// socket that several flows share (per-CPU receivers), at most `cap` senders.
#[derive(Debug, Clone)]
pub struct Accounts {
    flows: Vec<(Option<std::net::SocketAddr>, SeqTracker)>,
    cap: usize,
    last: usize,
    foreign: u64,
}

impl Accounts {
    /// One flow's account (its socket is connected: every datagram is the flow's).
    pub fn one() -> Accounts {
        Accounts { flows: vec![(None, SeqTracker::default())], cap: 1, last: 0, foreign: 0 }
    }

    /// Accounts for a shared socket's senders, told apart by source, at most `cap` of them.
    pub fn by_source(cap: usize) -> Accounts {
        Accounts { flows: Vec::new(), cap: cap.max(1), last: 0, foreign: 0 }
    }

    /// Counts a datagram that is not the test's (no identity, a stranger's source): it
    /// changes no other figure.
    #[inline]
    pub fn foreign(&mut self) {
        self.foreign += 1;
    }

    /// Accounts one datagram from `from` (`None` on a flow's own socket); false, and counted
    /// foreign, when it comes from a sender beyond the cap or its sequence number is
    /// implausible.
    #[inline]
    pub fn on_datagram(&mut self, from: Option<std::net::SocketAddr>, seq: u64, sent_ns: u64, recv_ns: u64) -> bool {
        // Datagrams come in runs from one sender: try the last one first.
        let i = if self.flows.get(self.last).is_some_and(|(a, _)| *a == from) {
            self.last
        } else if let Some(i) = self.flows.iter().position(|(a, _)| *a == from) {
            i
        } else if self.flows.len() < self.cap {
            self.flows.push((from, SeqTracker::default()));
            self.flows.len() - 1
        } else {
            self.foreign += 1;
            return false;
        };
        self.last = i;
        let plausible = self.flows[i].1.on_datagram(seq, sent_ns, recv_ns);
        if !plausible {
            self.foreign += 1;
        }
        plausible
    }

    /// Every sender's account summed (jitter: their mean), and the foreign datagrams.
    pub fn total(&self) -> UdpQuality {
        let parts: Vec<UdpQuality> = self.flows.iter().map(|(_, t)| t.total()).collect();
        UdpQuality { foreign: self.foreign, ..UdpQuality::sum(parts.iter()).unwrap_or_default() }
    }
}

/// The change from `before` to `now` (jitter: `now`'s).
pub fn delta(now: &UdpQuality, before: &UdpQuality) -> UdpQuality {
    UdpQuality {
        lost: now.lost - before.lost,
        out_of_order: now.out_of_order - before.out_of_order,
        duplicates: now.duplicates - before.duplicates,
        jitter_ns: now.jitter_ns,
        received: now.received - before.received,
        foreign: now.foreign - before.foreign,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(seqs: &[u64]) -> UdpQuality {
        let mut t = SeqTracker::default();
        for (i, &s) in seqs.iter().enumerate() {
            t.on_datagram(s, s * 1000, s * 1000 + 50_000 + i as u64);
        }
        t.total()
    }

    #[test]
    fn loss_reordering_and_duplicates_are_told_apart() {
        let q = feed(&[0, 1, 2, 3, 4]);
        assert_eq!((q.lost, q.out_of_order, q.duplicates, q.received), (0, 0, 0, 5));
        // 2 and 5 missing.
        let q = feed(&[0, 1, 3, 4, 6]);
        assert_eq!((q.lost, q.out_of_order, q.duplicates), (2, 0, 0));
        // 2 late: found, counted out of order, not lost.
        let q = feed(&[0, 1, 3, 2, 4]);
        assert_eq!((q.lost, q.out_of_order, q.duplicates), (0, 1, 0));
        // 3 twice: a duplicate, neither lost nor received twice.
        let q = feed(&[0, 1, 2, 3, 3, 4]);
        assert_eq!((q.lost, q.out_of_order, q.duplicates, q.received), (0, 0, 1, 5));
        // A late duplicate of an old one.
        let q = feed(&[0, 1, 2, 3, 1]);
        assert_eq!((q.lost, q.out_of_order, q.duplicates), (0, 0, 1));
    }

    #[test]
    fn the_window_wraps_without_false_duplicates() {
        let mut t = SeqTracker::default();
        for s in 0..3 * WINDOW {
            t.on_datagram(s, 0, 0);
        }
        let q = t.total();
        assert_eq!((q.lost, q.duplicates, q.out_of_order, q.received), (0, 0, 0, 3 * WINDOW));
        // A jump over more than the window, then one from before it.
        t.on_datagram(5 * WINDOW, 0, 0);
        t.on_datagram(3 * WINDOW + 5, 0, 0);
        let q = t.total();
        assert_eq!(q.lost, 2 * WINDOW as i64 - 1);
        assert_eq!(q.out_of_order, 1);
    }

    #[test]
    fn jitter_follows_rfc_3550() {
        let mut t = SeqTracker::default();
        // Transit alternates 100 us and 120 us: |D| = 20 us each time after the first.
        for s in 0..2000u64 {
            let transit = if s % 2 == 0 { 100_000 } else { 120_000 };
            t.on_datagram(s, s * 1_000_000, s * 1_000_000 + transit);
        }
        let j = t.total().jitter_ns;
        assert!((j - 20_000.0).abs() < 1.0, "{j}");
        // Constant transit: jitter decays to nothing.
        let mut t = SeqTracker::default();
        for s in 0..100u64 {
            t.on_datagram(s, s * 1000, s * 1000 + 7);
        }
        assert_eq!(t.total().jitter_ns, 0.0);
    }

    #[test]
    fn a_shared_socket_accounts_each_sender_alone() {
        let (a, b, c): (std::net::SocketAddr, std::net::SocketAddr, std::net::SocketAddr) =
            ("127.0.0.1:1000".parse().unwrap(), "127.0.0.1:1001".parse().unwrap(), "127.0.0.1:1002".parse().unwrap());
        let mut acc = Accounts::by_source(2);
        // Interleaved, each in order: nothing lost or reordered although the sequence numbers,
        // taken together, jump back and forth.
        for s in 0..100u64 {
            assert!(acc.on_datagram(Some(a), s, 0, 0));
            assert!(acc.on_datagram(Some(b), s, 0, 0));
        }
        // b loses 100..110.
        assert!(acc.on_datagram(Some(b), 110, 0, 0));
        // A third sender is over the cap: not accounted.
        assert!(!acc.on_datagram(Some(c), 0, 0, 0));
        let q = acc.total();
        assert_eq!((q.received, q.lost, q.out_of_order, q.duplicates), (201, 10, 0, 0));
        let mut one = Accounts::one();
        assert!(one.on_datagram(None, 0, 0, 0) && one.on_datagram(None, 2, 0, 0));
        assert_eq!(one.total().lost, 1);
    }

    #[test]
    fn headers_round_trip_and_carry_the_test() {
        let id = identity(&[7; 16]);
        let mut b = [0u8; 30];
        write_header(&mut b, 42, 7_000_000_123, id);
        assert_eq!(read_header(&b, id), Some((42, 7_000_000_123)));
        assert_eq!(read_header(&b[..23], id), None);
        assert_eq!(read_header(&b, identity(&[8; 16])), None, "another test's");
        assert_ne!(identity(&[1; 16]), identity(&[2; 16]));
    }

    #[test]
    fn an_implausible_sequence_number_changes_no_figure() {
        // The audit's forged datagrams into a receiver: sequence 2^64-1 and 2^40 made a run
        // "lose" 1.1 × 10^12 datagrams, jitter 1e17 ns.
        let mut acc = Accounts::one();
        for s in 0..100u64 {
            assert!(acc.on_datagram(None, s, s * 1000, s * 1000 + 50));
        }
        let before = acc.total();
        assert!(!acc.on_datagram(None, u64::MAX, 0, 5_000_000));
        assert!(!acc.on_datagram(None, 1 << 40, 0, 5_000_000));
        acc.foreign();
        let after = acc.total();
        assert_eq!(after.foreign, 3);
        assert_eq!(UdpQuality { foreign: 0, ..after }, before, "nothing else moved");
        // A real burst of loss within the plausible jump is loss.
        assert!(acc.on_datagram(None, 100 + 1_000_000, 0, 0));
        assert_eq!(acc.total().lost, 1_000_000);
    }
}
