//! Open-loop schedules: when the j-th request of the whole test is due.
//!
//! A schedule is a rate function r(t); its cumulative count is n(t) = ∫ r. Request j is due at
//! the time n reaches j: t(j) = n⁻¹(j). Constant rates, linear ramps and steps all have closed
//! forms, so the intended times never drift and do not depend on when the sender wakes up.

use netblast_spec::profile::HttpSection;
use std::time::Duration;

/// A piece of the rate function: from `start_s` for `len_s` seconds, rate going linearly from
/// `r0` to `r1` (req/s), with `n0` requests due before `start_s`.
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

    /// Requests due in the first `dt` seconds of the segment.
    fn count_at(&self, dt: f64) -> f64 {
        let a = (self.r1 - self.r0) / self.len_s;
        self.r0 * dt + a * dt * dt / 2.0
    }

    /// Seconds into the segment at which `k` requests are due (k within the segment).
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

/// When requests are due.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    segments: Vec<Segment>,
    end_s: f64,
}

impl Schedule {
    /// The schedule of an `[http]` section over `duration`; `None` for closed loop.
    pub fn from_section(h: &HttpSection, duration: Duration) -> Option<Schedule> {
        let d = duration.as_secs_f64();
        let mut segments = Vec::new();
        let mut n = 0.0;
        let mut t = 0.0;
        let mut push = |len: f64, r0: f64, r1: f64, t: &mut f64, n: &mut f64| {
            if len <= 0.0 {
                return;
            }
            let s = Segment { start_s: *t, len_s: len, r0, r1, n0: *n };
            *n += s.count();
            *t += len;
            segments.push(s);
        };
        if !h.steps.is_empty() {
            for step in &h.steps {
                let r = step.rate.per_second();
                push(step.duration.get().as_secs_f64(), r, r, &mut t, &mut n);
            }
        } else {
            let r0 = h.rate?.per_second();
            match h.rate_to {
                Some(r1) => {
                    let ramp = h.ramp.map(|r| r.get().as_secs_f64()).unwrap_or(d).min(d);
                    push(ramp, r0, r1.per_second(), &mut t, &mut n);
                    push(d - ramp, r1.per_second(), r1.per_second(), &mut t, &mut n);
                }
                None => push(d, r0, r0, &mut t, &mut n),
            }
        }
        let end_s = segments.last().map(|s| s.start_s + s.len_s).unwrap_or(0.0).min(d);
        Some(Schedule { segments, end_s })
    }

    /// Requests due in [0, t).
    pub fn count_before(&self, t: f64) -> f64 {
        let t = t.clamp(0.0, self.end_s);
        match self.segments.iter().rev().find(|s| s.start_s <= t) {
            Some(s) => s.n0 + s.count_at((t - s.start_s).min(s.len_s)),
            None => 0.0,
        }
    }

    /// Total requests the schedule asks for.
    pub fn total(&self) -> u64 {
        self.count_before(self.end_s).ceil() as u64
    }

    /// When request `j` (0-based, over the whole test) is due; `None` past the end.
    pub fn due(&self, j: u64) -> Option<Duration> {
        let k = j as f64;
        let s = self.segments.iter().rev().find(|s| s.n0 <= k && s.r0 + s.r1 > 0.0)?;
        let dt = s.time_of(k - s.n0);
        let t = s.start_s + dt;
        (t < self.end_s && k < s.n0 + s.count() + 1e-9).then(|| Duration::from_secs_f64(t))
    }

    /// Mean rate over [a, b) in requests/s.
    pub fn rate_between(&self, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        (self.count_before(b) - self.count_before(a)) / (b - a)
    }

    /// When the schedule ends.
    pub fn end(&self) -> Duration {
        Duration::from_secs_f64(self.end_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netblast_spec::profile::RateStep;
    use netblast_spec::units::{Dur, Rate};

    fn section(f: impl FnOnce(&mut HttpSection)) -> HttpSection {
        let mut h = HttpSection::default();
        f(&mut h);
        h
    }

    #[test]
    fn constant_rate_is_evenly_spaced_and_exact() {
        let s = Schedule::from_section(&section(|h| h.rate = Some(Rate(5000.0))), Duration::from_secs(5)).unwrap();
        assert_eq!(s.total(), 25_000);
        assert_eq!(s.due(0), Some(Duration::ZERO));
        assert_eq!(s.due(5000), Some(Duration::from_secs(1)));
        assert!(s.due(24_999).unwrap() < Duration::from_secs(5));
        assert_eq!(s.due(25_000), None);
        assert!((s.rate_between(1.0, 2.0) - 5000.0).abs() < 1e-6);
    }

    #[test]
    fn ramp_integrates_the_rate() {
        let h = section(|h| {
            h.rate = Some(Rate(1000.0));
            h.rate_to = Some(Rate(3000.0));
            h.ramp = Some(Dur(Duration::from_secs(2)));
        });
        let s = Schedule::from_section(&h, Duration::from_secs(4)).unwrap();
        // 2 s ramp averaging 2000/s, then 2 s at 3000/s.
        assert_eq!(s.total(), 4000 + 6000);
        assert!((s.rate_between(0.0, 0.1) - 1050.0).abs() < 1e-6, "slope 1000/s per s");
        assert!((s.rate_between(3.0, 4.0) - 3000.0).abs() < 1e-6);
        // Due times increase and invert the count.
        let mut last = Duration::ZERO;
        for j in (0..10_000).step_by(97) {
            let t = s.due(j).unwrap();
            assert!(t >= last);
            assert!((s.count_before(t.as_secs_f64()) - j as f64).abs() < 1e-3, "j {j}");
            last = t;
        }
    }

    #[test]
    fn steps_follow_each_other() {
        let h = section(|h| {
            h.steps = vec![
                RateStep { rate: Rate(100.0), duration: Dur(Duration::from_secs(1)) },
                RateStep { rate: Rate(1000.0), duration: Dur(Duration::from_secs(2)) },
            ];
        });
        let s = Schedule::from_section(&h, Duration::from_secs(3)).unwrap();
        assert_eq!(s.total(), 2100);
        assert_eq!(s.due(100), Some(Duration::from_secs(1)));
        assert!((s.due(600).unwrap().as_secs_f64() - 1.5).abs() < 1e-9);
        assert!((s.rate_between(1.0, 3.0) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn closed_loop_has_no_schedule() {
        assert!(Schedule::from_section(&HttpSection::default(), Duration::from_secs(1)).is_none());
    }
}
