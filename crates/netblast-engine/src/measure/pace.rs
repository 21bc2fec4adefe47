//! The one pacer of the generators that pace in user space (rr's requests, cps's and hold's
//! connections, UDP datagrams at a bit rate, a `-b` TCP sender's bytes, HTTP's open loop): a
//! schedule of intended times, slot `k` due at `start + t(k)`, computed from the start and never
//! from when the flow woke, so it does not drift. The slots are a constant gap apart
//! ([`Pace::new`], [`Pace::per_second`]: `t(k) = k × gap`), or follow a rate that changes over the
//! run ([`Pace::over`] a [`Curve`]: ramps and steps, `t(k)` the time its count reaches `k`).
//! What a flow does with the slots that pass while it is busy is its own rule, and the schedule
//! has each:
//!
//! - **skip** ([`Pace::skip_missed`]): a flow that does one thing at a time (a request and its
//!   answer, a connection) goes at once when late and moves on to the first slot after now; the
//!   slots it missed are counted, never sent in a burst.
//! - **catch up** ([`Pace::due_by`]): a datagram sender sends every slot due by now and a grain
//!   ahead (at most a batch a call), as iperf3's pacing does, so its bit rate over the run is the
//!   one asked even after a stall. HTTP's open loop catches up one slot at a time
//!   ([`Pace::due`], [`Pace::take`]): a request whose time has passed is sent at once (queued
//!   for a free connection), its latency counted from its intended time.
//! - **fluid** ([`Pace::count_by`], [`Pace::at`]): a bulk TCP sender held at `-b` counts bytes
//!   as slots: what it may have handed its socket by now, and when its next chunk is due (the
//!   kernel paces the segments, `SO_MAX_PACING_RATE`, a little above the rate).

use std::time::{Duration, Instant};

/// A schedule of slots from `start`, and the slots taken so far.
#[derive(Debug, Clone)]
pub struct Pace {
    start: Instant,
    slots: Slots,
    /// Slots taken or skipped: the next is slot `next`.
    next: u64,
}

/// When the slots are due, in seconds from the start.
#[derive(Debug, Clone)]
enum Slots {
    /// A constant gap (seconds).
    Gap(f64),
    /// A rate function.
    Curve(Curve),
}

impl Slots {
    /// How many slots have come due by `since` seconds (fractional: slot `k` is due once it
    /// reaches `k`).
    fn count(&self, since: f64) -> f64 {
        match self {
            Slots::Gap(gap_s) => since / gap_s,
            Slots::Curve(c) => c.count_before(since),
        }
    }
}

impl Pace {
    /// Slots `gap` apart, the first at `start`.
    pub fn new(start: Instant, gap: Duration) -> Pace {
        Pace::new_gap(start, gap.as_secs_f64())
    }

    /// `per_second` slots a second from `start`; `None` when not positive (no pacing).
    pub fn per_second(start: Instant, per_second: f64) -> Option<Pace> {
        (per_second > 0.0 && per_second.is_finite()).then(|| Pace::new_gap(start, 1.0 / per_second))
    }

    fn new_gap(start: Instant, gap_s: f64) -> Pace {
        Pace { start, slots: Slots::Gap(gap_s), next: 0 }
    }

    /// Slots that follow a rate function from `start`: slot `k` is due when the curve's count
    /// reaches `k`, and none is due past its end ([`Pace::next_due`]).
    pub fn over(start: Instant, curve: Curve) -> Pace {
        Pace { start, slots: Slots::Curve(curve), next: 0 }
    }

    /// When slot `k` is due (slot 0 at the start); a slot past a curve's end is due at its end.
    pub fn at(&self, k: u64) -> Instant {
        let t = match &self.slots {
            Slots::Gap(gap_s) => k as f64 * gap_s,
            Slots::Curve(c) => c.time_of(k).unwrap_or(c.end_s),
        };
        self.start + Duration::from_secs_f64(t)
    }

    /// When the next slot is due.
    pub fn due(&self) -> Instant {
        self.at(self.next)
    }

    /// The next slot's number (from 0 at the start).
    pub fn next_slot(&self) -> u64 {
        self.next
    }

    /// When the next slot is due; `None` once the schedule has no next slot (a curve's count
    /// ran out; a gap never ends).
    pub fn next_due(&self) -> Option<Instant> {
        let t = match &self.slots {
            Slots::Gap(gap_s) => self.next as f64 * gap_s,
            Slots::Curve(c) => c.time_of(self.next)?,
        };
        Some(self.start + Duration::from_secs_f64(t))
    }

    /// The slots due by `at` not taken yet (catch up: each is sent).
    pub fn due_by(&self, at: Instant) -> u64 {
        if at < self.due() {
            return 0;
        }
        let since = at.saturating_duration_since(self.start).as_secs_f64();
        (self.slots.count(since) as u64 + 1).saturating_sub(self.next)
    }

    /// The slots whose time has come by `at`, taken or not: a fluid schedule's count (bytes
    /// due), which its sender compares with what it sent.
    pub fn count_by(&self, at: Instant) -> u64 {
        self.slots.count(at.saturating_duration_since(self.start).as_secs_f64()) as u64
    }

    /// Takes `n` slots (what was sent, or, for a flow that shares a schedule with others in
    /// turn, the slots that are theirs).
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

/// A piece of a rate function: `secs` long, the rate going linearly from `from` to `to`
/// (slots a second).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ramp {
    /// How long the piece lasts, in seconds.
    pub secs: f64,
    /// The rate at its start.
    pub from: f64,
    /// The rate at its end.
    pub to: f64,
}

/// A rate function r(t) made of linear pieces (constant rates, ramps, steps), and its
/// cumulative count n(t) = ∫ r. Slot `k` is due when n reaches `k`: t(k) = n⁻¹(k). Every piece
/// has closed forms, so the intended times never drift and do not depend on when a sender
/// wakes.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    segments: Vec<Segment>,
    end_s: f64,
}

/// A placed piece: from `start_s` for `len_s` seconds, rate from `r0` to `r1`, with `n0`
/// slots due before `start_s`.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Segment {
    start_s: f64,
    len_s: f64,
    r0: f64,
    r1: f64,
    n0: f64,
}

impl Segment {
    fn count(&self) -> f64 {
        (self.r0 + self.r1) / 2.0 * self.len_s
    }

    /// Slots due in the first `dt` seconds of the segment.
    fn count_at(&self, dt: f64) -> f64 {
        let a = (self.r1 - self.r0) / self.len_s;
        self.r0 * dt + a * dt * dt / 2.0
    }

    /// Seconds into the segment at which `k` slots are due (k within the segment).
    fn time_of(&self, k: f64) -> f64 {
        let a = (self.r1 - self.r0) / self.len_s;
        if a.abs() < 1e-12 {
            return k / self.r0;
        }
        // a/2 t² + r0 t - k = 0, the root in [0, len].
        let disc = (self.r0 * self.r0 + 2.0 * a * k).max(0.0);
        let t = (disc.sqrt() - self.r0) / a;
        t.clamp(0.0, self.len_s)
    }
}

impl Curve {
    /// The pieces one after the other from 0, cut at `until`; pieces of no length are left out.
    pub fn new(pieces: impl IntoIterator<Item = Ramp>, until: Duration) -> Curve {
        let (mut segments, mut t, mut n) = (Vec::new(), 0.0, 0.0);
        for p in pieces.into_iter().filter(|p| p.secs > 0.0) {
            let s = Segment { start_s: t, len_s: p.secs, r0: p.from, r1: p.to, n0: n };
            n += s.count();
            t += p.secs;
            segments.push(s);
        }
        let end_s = segments.last().map(|s| s.start_s + s.len_s).unwrap_or(0.0).min(until.as_secs_f64());
        Curve { segments, end_s }
    }

    /// Slots due in [0, t).
    pub fn count_before(&self, t: f64) -> f64 {
        let t = t.clamp(0.0, self.end_s);
        match self.segments.iter().rev().find(|s| s.start_s <= t) {
            Some(s) => s.n0 + s.count_at((t - s.start_s).min(s.len_s)),
            None => 0.0,
        }
    }

    /// Total slots the curve asks for.
    pub fn total(&self) -> u64 {
        self.count_before(self.end_s).ceil() as u64
    }

    /// Seconds from the start at which slot `k` is due; `None` past the end.
    pub fn time_of(&self, k: u64) -> Option<f64> {
        let k = k as f64;
        let s = self.segments.iter().rev().find(|s| s.n0 <= k && s.r0 + s.r1 > 0.0)?;
        let t = s.start_s + s.time_of(k - s.n0);
        (t < self.end_s && k < s.n0 + s.count() + 1e-9).then_some(t)
    }

    /// Mean rate over [a, b) in slots a second.
    pub fn rate_between(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        (self.count_before(b) - self.count_before(a)) / (b - a)
    }

    /// When the curve ends.
    pub fn end(&self) -> Duration {
        Duration::from_secs_f64(self.end_s)
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
        let mut skip = p.clone();
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

    fn curve(pieces: &[(f64, f64, f64)], until: f64) -> Curve {
        let ramps = pieces.iter().map(|&(secs, from, to)| Ramp { secs, from, to });
        Curve::new(ramps, Duration::from_secs_f64(until))
    }

    #[test]
    fn a_constant_curve_is_evenly_spaced_and_exact() {
        let c = curve(&[(5.0, 5000.0, 5000.0)], 5.0);
        assert_eq!(c.total(), 25_000);
        assert_eq!(c.time_of(0), Some(0.0));
        assert_eq!(c.time_of(5000), Some(1.0));
        assert!(c.time_of(24_999).unwrap() < 5.0);
        assert_eq!(c.time_of(25_000), None);
        assert!((c.rate_between(1.0, 2.0) - 5000.0).abs() < 1e-6);
    }

    #[test]
    fn a_ramp_integrates_the_rate_and_its_times_invert_the_count() {
        // 2 s ramp averaging 2000/s, then 2 s at 3000/s.
        let c = curve(&[(2.0, 1000.0, 3000.0), (2.0, 3000.0, 3000.0)], 4.0);
        assert_eq!(c.total(), 4000 + 6000);
        assert!((c.rate_between(0.0, 0.1) - 1050.0).abs() < 1e-6, "slope 1000/s per s");
        assert!((c.rate_between(3.0, 4.0) - 3000.0).abs() < 1e-6);
        let mut last = 0.0;
        for k in (0..10_000).step_by(97) {
            let t = c.time_of(k).unwrap();
            assert!(t >= last);
            assert!((c.count_before(t) - k as f64).abs() < 1e-3, "k {k}");
            last = t;
        }
    }

    #[test]
    fn steps_follow_each_other_and_the_end_cuts_them() {
        let c = curve(&[(1.0, 100.0, 100.0), (0.0, 7.0, 7.0), (2.0, 1000.0, 1000.0)], 3.0);
        assert_eq!(c.total(), 2100);
        assert_eq!(c.time_of(100), Some(1.0));
        assert!((c.time_of(600).unwrap() - 1.5).abs() < 1e-9);
        assert!((c.rate_between(1.0, 3.0) - 1000.0).abs() < 1e-6);
        let cut = curve(&[(1.0, 100.0, 100.0), (2.0, 1000.0, 1000.0)], 1.5);
        assert_eq!(cut.end(), Duration::from_millis(1500));
        assert_eq!(cut.total(), 600);
        // A step at rate 0 at the end: the count reaches 100 as it starts, and no more.
        let quiet = curve(&[(1.0, 100.0, 100.0), (1.0, 0.0, 0.0)], 2.0);
        assert_eq!(quiet.time_of(100), Some(1.0));
        assert_eq!(quiet.time_of(101), None);
    }

    #[test]
    fn a_pace_over_a_curve_takes_its_slots_in_turn_and_ends_with_it() {
        let t0 = Instant::now();
        let mut p = Pace::over(t0, curve(&[(1.0, 1000.0, 1000.0)], 1.0));
        // The second of two flows in turn: slots 1, 3, 5, ...
        p.take(1);
        assert_eq!(p.due(), t0 + MS);
        p.take(2);
        assert_eq!(p.due(), t0 + 3 * MS);
        assert_eq!(p.due_by(t0 + Duration::from_micros(5500)), 3, "slots 3, 4, 5");
        assert_eq!(p.count_by(t0 + 2 * MS), 2);
        assert!(p.next_due().is_some());
        p.take(996);
        assert!(p.next_due().is_some(), "slot 999 is due at 999 ms");
        p.take(1);
        assert!(p.next_due().is_none());
        assert_eq!(p.due(), t0 + Duration::from_secs(1), "a slot past the end is due at the end");
        assert!(Pace::new(t0, MS).next_due().is_some(), "a gap never ends");
    }
}
