//! An `[http]` section's open-loop schedule: its rate over the run (constant, a ramp to
//! `rate_to`, or `steps`) as the shared pacer's rate function ([`Curve`]); request j of the
//! whole test is due when the curve's count reaches j.

use crate::measure::pace::{Curve, Ramp};
use netblast_spec::profile::HttpSection;
use std::time::Duration;

/// The rate function of an `[http]` section over `duration`; `None` for closed loop.
pub fn from_section(h: &HttpSection, duration: Duration) -> Option<Curve> {
    let d = duration.as_secs_f64();
    let flat = |secs: f64, r: f64| Ramp { secs, from: r, to: r };
    let pieces = if !h.steps.is_empty() {
        h.steps.iter().map(|s| flat(s.duration.get().as_secs_f64(), s.rate.per_second())).collect()
    } else {
        let r0 = h.rate?.per_second();
        match h.rate_to {
            Some(r1) => {
                let (r1, ramp) = (r1.per_second(), h.ramp.map(|r| r.get().as_secs_f64()).unwrap_or(d).min(d));
                vec![Ramp { secs: ramp, from: r0, to: r1 }, flat(d - ramp, r1)]
            }
            None => vec![flat(d, r0)],
        }
    };
    Some(Curve::new(pieces, duration))
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
    fn a_constant_rate_lasts_the_run() {
        let s = from_section(&section(|h| h.rate = Some(Rate(5000.0))), Duration::from_secs(5)).unwrap();
        assert_eq!(s.total(), 25_000);
        assert_eq!(s.end(), Duration::from_secs(5));
        assert!((s.rate_between(1.0, 2.0) - 5000.0).abs() < 1e-6);
    }

    #[test]
    fn a_ramp_reaches_rate_to_and_holds_it() {
        let h = section(|h| {
            h.rate = Some(Rate(1000.0));
            h.rate_to = Some(Rate(3000.0));
            h.ramp = Some(Dur(Duration::from_secs(2)));
        });
        let s = from_section(&h, Duration::from_secs(4)).unwrap();
        // 2 s ramp averaging 2000/s, then 2 s at 3000/s.
        assert_eq!(s.total(), 4000 + 6000);
        assert!((s.rate_between(0.0, 0.1) - 1050.0).abs() < 1e-6, "slope 1000/s per s");
        assert!((s.rate_between(3.0, 4.0) - 3000.0).abs() < 1e-6);
        // Without --ramp the ramp is the whole run.
        let whole = from_section(
            &section(|h| {
                h.rate = Some(Rate(0.0));
                h.rate_to = Some(Rate(2000.0));
            }),
            Duration::from_secs(2),
        )
        .unwrap();
        assert_eq!(whole.total(), 2000);
    }

    #[test]
    fn steps_follow_each_other() {
        let h = section(|h| {
            h.steps = vec![
                RateStep { rate: Rate(100.0), duration: Dur(Duration::from_secs(1)) },
                RateStep { rate: Rate(1000.0), duration: Dur(Duration::from_secs(2)) },
            ];
        });
        let s = from_section(&h, Duration::from_secs(3)).unwrap();
        assert_eq!(s.total(), 2100);
        assert_eq!(s.time_of(100), Some(1.0));
        assert!((s.rate_between(1.0, 3.0) - 1000.0).abs() < 1e-6);
    }

    #[test]
    fn closed_loop_has_no_schedule() {
        assert!(from_section(&HttpSection::default(), Duration::from_secs(1)).is_none());
    }
}
