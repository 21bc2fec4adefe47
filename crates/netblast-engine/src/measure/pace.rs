//! The one pacer of the generators that pace in user space (rr's requests, cps's and hold's
//! connections, UDP datagrams at a bit rate): a schedule of intended times, slot `k` due at
//! `start + k × gap`, computed from the start and never from when the flow woke, so it does not
//! drift. What a flow does with the slots that pass while it is busy is its own rule, and the
//! schedule has both:
//!
//! - **skip** ([`Pace::skip_missed`]): a flow that does one thing at a time (a request and its
//!   answer, a connection) goes at once when late and moves on to the first slot after now; the
//!   slots it missed are counted, never sent in a burst.
//! - **catch up** ([`Pace::due_by`]): a datagram sender sends every slot due by now and a grain
//!   ahead (at most a batch a call), as iperf3's pacing does, so its bit rate over the run is the
//!   one asked even after a stall.
//!
//! - **fluid** ([`Pace::count_by`], [`Pace::at`]): a bulk TCP sender held at `-b` counts bytes
//!   as slots: what it may have handed its socket by now, and when its next chunk is due (the
//!   kernel paces the segments, `SO_MAX_PACING_RATE`, a little above the rate).
//!
//! HTTP's open loop has a schedule of its own (`kinds::http::schedule`): its rate changes over
//! the run (ramps and steps, a rate function with closed forms), which a constant gap cannot
//! say.

use std::time::{Duration, Instant};

/// A schedule of slots `gap` apart from `start`, and the slots taken so far.
#[derive(Debug, Clone, Copy)]
pub struct Pace {
    start: Instant,
    gap_s: f64,
    /// Slots taken or skipped: the next is slot `next`.
    next: u64,
}

impl Pace {
    /// Slots `gap` apart, the first at `start`.
    pub fn new(start: Instant, gap: Duration) -> Pace {
        Pace { start, gap_s: gap.as_secs_f64(), next: 0 }
    }

    /// `per_second` slots a second from `start`; `None` when not positive (no pacing).
    pub fn per_second(start: Instant, per_second: f64) -> Option<Pace> {
        (per_second > 0.0 && per_second.is_finite()).then(|| Pace { start, gap_s: 1.0 / per_second, next: 0 })
    }

    /// When slot `k` is due (slot 0 at the start).
    pub fn at(&self, k: u64) -> Instant {
        self.start + Duration::from_secs_f64(k as f64 * self.gap_s)
    }

    /// When the next slot is due.
    pub fn due(&self) -> Instant {
        self.at(self.next)
    }

    /// The slots due by `at` not taken yet (catch up: each is sent).
    pub fn due_by(&self, at: Instant) -> u64 {
        if at < self.due() {
            return 0;
        }
        let since = at.saturating_duration_since(self.start).as_secs_f64();
        ((since / self.gap_s) as u64 + 1).saturating_sub(self.next)
    }

    /// The slots whose time has come by `at`, taken or not: a fluid schedule's count (bytes
    /// due), which its sender compares with what it sent.
    pub fn count_by(&self, at: Instant) -> u64 {
        (at.saturating_duration_since(self.start).as_secs_f64() / self.gap_s) as u64
    }

    /// Takes `n` slots (what was sent).
    pub fn take(&mut self, n: u64) {
        self.next += n;
    }

    /// Skip: when the next slot is due by `now`, passes over the slots due before the latest one
    /// due by `now` (they were missed) and returns how many; the caller takes the one left. `None`
    /// when nothing is due yet.
    pub fn skip_missed(&mut self, now: Instant) -> Option<u64> {
        let due = self.due_by(now);
        if due == 0 {
            return None;
        }
        let missed = due - 1;
        self.next += missed;
        Some(missed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn slots_are_due_from_the_start_and_never_drift() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0, MS);
        assert_eq!(p.due(), t0);
        for _ in 0..1000 {
            p.take(1);
        }
        // 1000 slots later: exactly a second after the start, whatever the rounding of each gap.
        let d = p.due().duration_since(t0).as_secs_f64();
        assert!((d - 1.0).abs() < 1e-9, "{d}");
    }

    #[test]
    fn catching_up_sends_every_slot_due_and_skipping_sends_one() {
        let t0 = Instant::now();
        let mut p = Pace::new(t0, MS);
        assert_eq!(p.due_by(t0), 1);
        // Busy for 10.5 ms: eleven slots due (0..=10).
        let late = t0 + Duration::from_micros(10_500);
        assert_eq!(p.due_by(late), 11);
        assert_eq!(p.due_by(t0 - MS), 0);
        let mut skip = p;
        assert_eq!(skip.skip_missed(late), Some(10));
        skip.take(1);
        // The next is the first slot after now, on the grid.
        assert_eq!(skip.due(), t0 + 11 * MS);
        assert_eq!(skip.skip_missed(late), None);
        p.take(p.due_by(late));
        assert_eq!(p.due(), t0 + 11 * MS);
        assert!(Pace::per_second(t0, 0.0).is_none());
        let mut q = Pace::per_second(t0, 1000.0).unwrap();
        q.take(1);
        assert_eq!(q.due(), t0 + MS);
    }

    #[test]
    fn a_fluid_schedule_counts_from_the_start_and_names_when_a_count_is_due() {
        let t0 = Instant::now();
        // 1 MB/s: a byte a microsecond.
        let p = Pace::per_second(t0, 1e6).unwrap();
        assert_eq!(p.count_by(t0), 0);
        assert_eq!(p.count_by(t0 - MS), 0);
        assert_eq!(p.count_by(t0 + Duration::from_micros(2500)), 2500);
        // The inverse: the 2 500th byte is due 2.5 ms in.
        let at = p.at(2500).duration_since(t0).as_secs_f64();
        assert!((at - 0.0025).abs() < 1e-9, "{at}");
    }
}
