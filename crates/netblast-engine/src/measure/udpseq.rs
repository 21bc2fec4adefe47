//! Sequenced UDP datagrams: the 16-byte header senders write (sequence number, send time) and
//! what receivers make of it: loss, reordering, duplicates and RFC 3550 jitter.
//!
//! Header, little endian: bytes 0..8 the flow's sequence number (from 0), 8..16 the send time
//! in ns since the test's start on the sender's clock. Only differences of transit times enter
//! the jitter, so the two ends' clocks need not agree.

use netblast_spec::result::UdpQuality;

/// Bytes of the header.
pub const HEADER: usize = 16;

/// Sequence numbers remembered behind the highest, to tell a duplicate from a late datagram.
const WINDOW: u64 = 1 << 16;

/// Writes the header into the first [`HEADER`] bytes of `buf`.
#[inline]
pub fn write_header(buf: &mut [u8], seq: u64, sent_ns: u64) {
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&sent_ns.to_le_bytes());
}

/// Reads a header; `None` for a datagram too short to carry one.
#[inline]
pub fn read_header(buf: &[u8]) -> Option<(u64, u64)> {
    if buf.len() < HEADER {
        return None;
    }
    let seq = u64::from_le_bytes(buf[..8].try_into().ok()?);
    let sent = u64::from_le_bytes(buf[8..16].try_into().ok()?);
    Some((seq, sent))
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
    pub fn on_datagram(&mut self, seq: u64, sent_ns: u64, recv_ns: u64) {
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
            return;
        } else {
            let (w, b) = self.bit(seq);
            if *w & b != 0 {
                self.duplicates += 1;
                return;
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
}

impl Accounts {
    /// One flow's account (its socket is connected: every datagram is the flow's).
    pub fn one() -> Accounts {
        Accounts { flows: vec![(None, SeqTracker::default())], cap: 1, last: 0 }
    }

    /// Accounts for a shared socket's senders, told apart by source, at most `cap` of them.
    pub fn by_source(cap: usize) -> Accounts {
        Accounts { flows: Vec::new(), cap: cap.max(1), last: 0 }
    }

    /// Accounts one datagram from `from` (`None` on a flow's own socket); false when it comes
    /// from a sender beyond the cap, which is not accounted.
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
            return false;
        };
        self.last = i;
        self.flows[i].1.on_datagram(seq, sent_ns, recv_ns);
        true
    }

    /// Every sender's account summed (jitter: their mean).
    pub fn total(&self) -> UdpQuality {
        let parts: Vec<UdpQuality> = self.flows.iter().map(|(_, t)| t.total()).collect();
        UdpQuality::sum(parts.iter()).unwrap_or_default()
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
    fn headers_round_trip() {
        let mut b = [0u8; 20];
        write_header(&mut b, 42, 7_000_000_123);
        assert_eq!(read_header(&b), Some((42, 7_000_000_123)));
        assert_eq!(read_header(&b[..15]), None);
    }
}
