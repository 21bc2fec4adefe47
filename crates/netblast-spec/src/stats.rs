//! Figures over repeated runs: the median, the mean with its 95% confidence interval (Student's
//! t), and the difference of two sets of runs with its interval (Welch), as a campaign reports
//! them. Pure functions of the samples.

use serde::{Deserialize, Serialize};

/// Two-sided 95% quantiles of Student's t for 1..=30 degrees of freedom; beyond, the normal's
/// 1.96 is within 2% of it.
const T95: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131, 2.120,
    2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
];

/// The two-sided 95% quantile of Student's t with `df` degrees of freedom (fractional `df`, as
/// Welch's gives, rounds down: the wider interval).
pub fn t95(df: f64) -> f64 {
    // Below one degree of freedom (or NaN): no interval.
    if df.is_nan() || df < 1.0 {
        return f64::INFINITY;
    }
    let d = df.floor() as usize;
    if d <= T95.len() { T95[d - 1] } else { 1.96 }
}

/// One figure over a set of runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    /// Runs that gave the figure.
    pub n: usize,
    /// Their median.
    pub median: f64,
    /// Their mean.
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 for one run.
    pub stdev: f64,
    /// The 95% confidence interval of the mean (Student's t), when two runs or more gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_low: Option<f64>,
    /// Its upper end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_high: Option<f64>,
    /// The lowest run.
    pub min: f64,
    /// The highest run.
    pub max: f64,
}

impl Spread {
    /// The spread of `samples` (NaN and infinities left out); `None` when none is left.
    pub fn of(samples: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let stdev = var.sqrt();
        let half = (n > 1).then(|| t95((n - 1) as f64) * stdev / (n as f64).sqrt());
        Some(Spread {
            n,
            median,
            mean,
            stdev,
            ci_low: half.map(|h| mean - h),
            ci_high: half.map(|h| mean + h),
            min: v[0],
            max: v[n - 1],
        })
    }

    /// Run-to-run spread: the standard deviation as a share of the mean (0 when the mean is 0).
    pub fn cv(&self) -> f64 {
        if self.mean == 0.0 { 0.0 } else { self.stdev / self.mean.abs() }
    }
}

/// The change from a base set of runs to another, as a share of the base's mean, with its 95%
/// confidence interval (Welch's t on the difference of the means).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// (mean − base mean) / base mean.
    pub change: f64,
    /// The interval's lower end, in the same terms.
    pub ci_low: f64,
    /// Its upper end.
    pub ci_high: f64,
    /// Whether the interval leaves out no change, and is not held within the noise band: a
    /// difference, not noise.
    pub differs: bool,
    /// The noise band (0.01: ±1%): an interval inside it is no difference, however narrow
    /// ([`Change::beyond`]); 0 when none was set.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub noise: f64,
}

fn is_zero(x: &f64) -> bool {
    *x == 0.0
}

impl Change {
    /// The change from `base` to `other`; `None` when either has fewer than two runs (no
    /// interval can be had) or the base's mean is 0.
    pub fn between(base: &Spread, other: &Spread) -> Option<Change> {
        if base.n < 2 || other.n < 2 || base.mean == 0.0 {
            return None;
        }
        let (va, vb) = (base.stdev.powi(2) / base.n as f64, other.stdev.powi(2) / other.n as f64);
        let se = (va + vb).sqrt();
        // Welch–Satterthwaite degrees of freedom; identical runs on both sides: no spread at all.
        let df = if se == 0.0 {
            f64::INFINITY
        } else {
            (va + vb).powi(2)
                / (va.powi(2) / (base.n - 1) as f64 + vb.powi(2) / (other.n - 1) as f64).max(f64::MIN_POSITIVE)
        };
        let half = if df.is_infinite() { 0.0 } else { t95(df) * se };
        let d = other.mean - base.mean;
        let scale = base.mean.abs();
        let (lo, hi) = ((d - half) / scale, (d + half) / scale);
        Some(Change { change: d / scale, ci_low: lo, ci_high: hi, differs: lo > 0.0 || hi < 0.0, noise: 0.0 })
    }

    /// This change judged against a noise band of ±`noise` (criterion's noise threshold): an
    /// interval that leaves out 0 but lies wholly inside the band is within the noise, not a
    /// difference. Runs of a bottleneck as steady as a token bucket give intervals narrow
    /// enough to call a 0.2% drift "a difference" without it.
    pub fn beyond(mut self, noise: f64) -> Change {
        self.noise = noise.max(0.0);
        let inside = self.ci_low >= -self.noise && self.ci_high <= self.noise;
        self.differs = (self.ci_low > 0.0 || self.ci_high < 0.0) && !inside;
        self
    }
}

impl std::fmt::Display for Change {
    /// `+6.1% [+2.0%, +10.4%]`, or with `, not a difference` when the interval holds 0.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:+.1}% [{:+.1}%, {:+.1}%]", self.change * 100.0, self.ci_low * 100.0, self.ci_high * 100.0)?;
        let significant = self.ci_low > 0.0 || self.ci_high < 0.0;
        if significant && !self.differs {
            write!(f, ", within the noise (±{}%)", self.noise * 100.0)?;
        } else if !self.differs {
            f.write_str(", not a difference")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_spread_of_known_samples() {
        // Mean 10, squared deviations 9 + 1 + 0 + 1 + 9 = 20: variance 20 / 4, stdev √5; the
        // half width t(4) × √5 / √5 = 2.776.
        let s = Spread::of(&[13.0, 7.0, 10.0, 9.0, 11.0]).unwrap();
        assert_eq!((s.n, s.median, s.mean, s.min, s.max), (5, 10.0, 10.0, 7.0, 13.0));
        assert!((s.stdev - 5f64.sqrt()).abs() < 1e-12, "{}", s.stdev);
        assert!((s.ci_low.unwrap() - 7.224).abs() < 1e-9 && (s.ci_high.unwrap() - 12.776).abs() < 1e-9, "{s:?}");
        assert!((s.cv() - 5f64.sqrt() / 10.0).abs() < 1e-12);
        let even = Spread::of(&[4.0, 1.0, 3.0, 2.0, f64::NAN]).unwrap();
        assert_eq!((even.n, even.median, even.min, even.max), (4, 2.5, 1.0, 4.0));
        let one = Spread::of(&[7.0]).unwrap();
        assert_eq!((one.stdev, one.ci_low, one.ci_high), (0.0, None, None));
        assert!(Spread::of(&[f64::NAN]).is_none());
    }

    #[test]
    fn a_change_is_a_difference_only_when_its_interval_leaves_out_zero() {
        let base = Spread::of(&[100.0, 101.0, 99.0, 100.5, 99.5]).unwrap();
        let more = Spread::of(&[110.0, 111.0, 109.0, 110.5, 109.5]).unwrap();
        let c = Change::between(&base, &more).unwrap();
        assert!((c.change - 0.10).abs() < 1e-9 && c.differs && c.ci_low < 0.10 && c.ci_high > 0.10, "{c}");
        // The same runs again: no change, and no difference.
        let same = Change::between(&base, &base).unwrap();
        assert_eq!((same.change, same.differs), (0.0, false));
        assert!(same.to_string().ends_with("not a difference"), "{same}");
        // Noisy runs whose means differ by 1%: the interval holds 0.
        let noisy_a = Spread::of(&[90.0, 110.0, 100.0]).unwrap();
        let noisy_b = Spread::of(&[91.0, 111.0, 101.0]).unwrap();
        assert!(!Change::between(&noisy_a, &noisy_b).unwrap().differs);
        assert!(Change::between(&Spread::of(&[1.0]).unwrap(), &more).is_none(), "one run: no interval");
        assert_eq!(format!("{c}"), format!("{:+.1}% [{:+.1}%, {:+.1}%]", 10.0, c.ci_low * 100.0, c.ci_high * 100.0));
    }

    #[test]
    fn a_narrow_change_inside_the_noise_band_is_no_difference() {
        let base = Spread::of(&[100.0, 100.01, 99.99, 100.0, 100.0]).unwrap();
        let drift = Spread::of(&[100.2, 100.21, 100.19, 100.2, 100.2]).unwrap();
        let c = Change::between(&base, &drift).unwrap();
        assert!(c.differs, "without a band, 0.2% on a steady bottleneck is significant: {c}");
        let banded = c.beyond(0.01);
        assert!(!banded.differs && banded.to_string().ends_with("within the noise (±1%)"), "{banded}");
        let more = Change::between(&base, &Spread::of(&[110.0, 110.1, 109.9, 110.0, 110.0]).unwrap()).unwrap();
        assert!(more.beyond(0.01).differs);
    }

    #[test]
    fn t_quantiles() {
        assert_eq!(t95(1.0), 12.706);
        assert_eq!(t95(4.7), 2.776);
        assert_eq!(t95(100.0), 1.96);
        assert!(t95(0.5).is_infinite());
    }
}
