//! The wall clock and the common start instant.
//!
//! Intervals are counted from a start instant `T` on the wall clock (UTC ns). Unless told
//! (`--start-at`, a coordinator's T0), `T` is the next multiple of the interval after set-up,
//! so two runs on hosts with synchronised clocks have intervals that cover the same wall-clock
//! spans and merge exactly. The monotonic [`Instant`] the workers count from is taken at `T`,
//! converted once from the wall clock.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Now, in ns since the Unix epoch (UTC).
pub fn now_unix_ns() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

/// The first multiple of `interval` at or after `after_ns` (both UTC ns).
pub fn next_boundary(after_ns: u64, interval: Duration) -> u64 {
    let i = (interval.as_nanos() as u64).max(1);
    after_ns.div_ceil(i) * i
}

/// RFC 3339 (UTC, to the nanosecond) of an instant in ns since the Unix epoch.
pub fn rfc3339(unix_ns: u64) -> String {
    netblast_spec::units::fmt_rfc3339(unix_ns)
}

/// Why a start instant cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StartError {
    /// The instant has already passed.
    #[error("the start instant {at} is {late} in the past")]
    Past {
        /// The instant, RFC 3339.
        at: String,
        /// How late, in the report's time format (`2.51 s`, `6.90 years`).
        late: String,
    },
    /// The instant is absurdly far ahead.
    #[error("the start instant {at} is more than {limit_s} s ahead")]
    TooFar {
        /// The instant, RFC 3339.
        at: String,
        /// The limit, s.
        limit_s: u64,
    },
}

/// A span in the report's time format, in days or years past a day (an instant typed as Unix
/// seconds where ms were meant is decades off, not "217650957766 ms").
fn how_long(ns: u64) -> String {
    const DAY: f64 = 86_400e9;
    let v = ns as f64;
    if v >= 365.25 * DAY {
        format!("{} years", netblast_spec::units::sig3(v / (365.25 * DAY)))
    } else if v >= DAY {
        format!("{} days", netblast_spec::units::sig3(v / DAY))
    } else {
        netblast_spec::units::fmt_ns(v)
    }
}

/// Longest wait for a start instant.
pub const MAX_START_WAIT: Duration = Duration::from_secs(300);

/// The monotonic instant at wall-clock `unix_ns`, if it is ahead and within
/// [`MAX_START_WAIT`] (the grace allows an instant a few ms past, as on a busy host).
pub fn instant_at(unix_ns: u64, grace: Duration) -> Result<Instant, StartError> {
    let (now_i, now_ns) = (Instant::now(), now_unix_ns());
    if unix_ns + grace.as_nanos() as u64 <= now_ns {
        return Err(StartError::Past { at: rfc3339(unix_ns), late: how_long(now_ns - unix_ns) });
    }
    if unix_ns < now_ns {
        // Within the grace: the instant a few ms ago, so intervals still count from it.
        return Ok(now_i.checked_sub(Duration::from_nanos(now_ns - unix_ns)).unwrap_or(now_i));
    }
    let ahead = Duration::from_nanos(unix_ns - now_ns);
    if ahead > MAX_START_WAIT {
        return Err(StartError::TooFar { at: rfc3339(unix_ns), limit_s: MAX_START_WAIT.as_secs() });
    }
    Ok(now_i + ahead)
}

/// How long before a start instant [`sleep_until`] stops sleeping and spins: a wake-up from a
/// sleep on a busy host can be late by milliseconds, a thread that is already running is not.
pub const SPIN_BEFORE: Duration = Duration::from_millis(2);

/// Waits until `t`: a plain sleep to [`SPIN_BEFORE`] before it, then a spin, so several
/// processes waiting for one instant start within microseconds of it (at the cost of at most
/// 2 ms of one CPU).
pub fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now + SPIN_BEFORE {
        std::thread::sleep(t - now - SPIN_BEFORE);
    }
    while Instant::now() < t {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundaries_are_multiples_at_or_after() {
        let s = Duration::from_secs(1);
        assert_eq!(next_boundary(5_000_000_000, s), 5_000_000_000);
        assert_eq!(next_boundary(5_000_000_001, s), 6_000_000_000);
        assert_eq!(next_boundary(7, Duration::from_nanos(0)), 7);
    }

    #[test]
    fn instants_in_the_past_or_too_far_are_refused() {
        let now = now_unix_ns();
        assert!(matches!(instant_at(now - 5_000_000_000, Duration::ZERO), Err(StartError::Past { .. })));
        assert!(matches!(instant_at(now + 3_600_000_000_000, Duration::ZERO), Err(StartError::TooFar { .. })));
        let t = instant_at(now + 20_000_000, Duration::ZERO).unwrap();
        sleep_until(t);
        let late = now_unix_ns() as i64 - (now + 20_000_000) as i64;
        assert!((0..2_000_000).contains(&late), "woke {late} ns after the instant");
    }

    #[test]
    fn rfc3339_has_nanoseconds() {
        assert_eq!(rfc3339(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123456789Z");
    }
}
