//! Lossless latency histograms for results and the wire.
//!
//! A histogram travels as HDR V2 + DEFLATE, base64, together with its configuration (bounds
//! and significant figures). Histograms are merged by adding them, never by averaging
//! percentiles, and only when their configurations are equal: two agents recording with a
//! different precision would make the sum misleading.

use base64::Engine as _;
use hdrhistogram::{
    Histogram,
    serialization::{Deserializer, Serializer, V2DeflateSerializer},
};
use serde::{Deserialize, Serialize};

/// Lowest latency we record: 1 ns.
pub const LOWEST_NS: u64 = 1;
/// Highest latency we record: 100 s; values above are clamped to it and counted as such.
pub const HIGHEST_NS: u64 = 100_000_000_000;
/// Significant figures: 3 keeps every recorded value within 0.1%.
pub const SIGFIG: u8 = 3;

/// Creates an empty latency histogram with netblast's standard configuration (ns).
pub fn new_latency_histogram() -> Histogram<u64> {
    // A panic here means the constants above are inconsistent, which is a bug.
    Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGFIG).expect("valid histogram bounds")
}

/// Records `ns` into `h`, clamping to the histogram's range instead of failing.
#[inline]
pub fn record_ns(h: &mut Histogram<u64>, ns: u64) {
    let v = ns.clamp(h.low(), h.high());
    // Cannot fail: v is within the histogram's bounds.
    let _ = h.record(v);
}

/// Why a histogram could not be decoded or merged.
#[derive(Debug, thiserror::Error)]
pub enum HistError {
    /// The base64 text is not valid base64.
    #[error("histogram is not valid base64: {0}")]
    Base64(String),
    /// The bytes are not an HDR V2 histogram.
    #[error("histogram is not a valid HDR V2 encoding: {0}")]
    Decode(String),
    /// Encoding failed (should not happen for valid histograms).
    #[error("histogram could not be encoded: {0}")]
    Encode(String),
    /// Two histograms with different configurations cannot be added.
    #[error("histograms differ in configuration ({0}); refusing to merge")]
    Mismatch(String),
}

/// A histogram as stored in a result: configuration plus compressed counts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EncodedHistogram {
    /// Unit of the recorded values (always `ns` for latencies).
    pub unit: String,
    /// Lowest discernible value.
    pub lowest: u64,
    /// Highest trackable value.
    pub highest: u64,
    /// Significant value digits.
    pub sigfig: u8,
    /// Number of recorded values (redundant, for readers that do not decode).
    pub count: u64,
    /// HDR V2 + DEFLATE, base64 (standard alphabet).
    pub hdr_v2_deflate_b64: String,
}

impl EncodedHistogram {
    /// Encodes a histogram of nanoseconds.
    pub fn encode(h: &Histogram<u64>) -> Result<EncodedHistogram, HistError> {
        let mut buf = Vec::new();
        V2DeflateSerializer::new().serialize(h, &mut buf).map_err(|e| HistError::Encode(format!("{e:?}")))?;
        Ok(EncodedHistogram {
            unit: "ns".to_string(),
            lowest: h.low(),
            highest: h.high(),
            sigfig: h.sigfig(),
            count: h.len(),
            hdr_v2_deflate_b64: base64::engine::general_purpose::STANDARD.encode(buf),
        })
    }

    /// Decodes back into a histogram with the stored configuration. What it allocates is
    /// bounded by the input and by [`MAX_COUNTS`], whatever the encoding declares: the
    /// compressed and inner lengths are checked against the bytes there are, and the
    /// configuration against the stored one and the ceiling, before any buffer is sized.
    pub fn decode(&self) -> Result<Histogram<u64>, HistError> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(&self.hdr_v2_deflate_b64)
            .map_err(|e| HistError::Base64(e.to_string()))?;
        let plain = inflate_checked(&bytes, (self.lowest, self.highest, self.sigfig))?;
        let h: Histogram<u64> =
            Deserializer::new().deserialize(&mut plain.as_slice()).map_err(|e| HistError::Decode(format!("{e:?}")))?;
        if h.len() != self.count {
            return Err(HistError::Decode(format!(
                "count field says {} but the histogram holds {}",
                self.count,
                h.len()
            )));
        }
        Ok(h)
    }
}

/// The most counts a decoded histogram may hold (8 bytes each: 8 MiB). netblast's own
/// latency histograms (1 ns to 100 s, 3 digits) hold 28 672.
pub const MAX_COUNTS: u64 = 1 << 20;

/// HDR V2 cookies (with the 0x10 word-size bits the Rust and Java writers set).
const V2_COOKIE: u32 = 0x1c84_9303 | 0x10;
const V2_COMPRESSED_COOKIE: u32 = 0x1c84_9304 | 0x10;
/// The V2 header after the cookie: payload length, normalizing offset, digits, lowest,
/// highest, integer-to-double ratio.
const V2_HEADER: usize = 4 + 4 + 4 + 8 + 8 + 8;

fn bad(what: String) -> HistError {
    HistError::Decode(what)
}

/// How many counts an HDR histogram of this configuration holds (HdrHistogram's own sizing),
/// or `None` for one that cannot be made.
pub fn counts_len(lowest: u64, highest: u64, sigfig: u8) -> Option<u64> {
    if lowest < 1 || sigfig > 5 || highest < lowest.checked_mul(2)? {
        return None;
    }
    let single = 2 * 10u64.pow(sigfig as u32);
    let sub_bucket_magnitude = (64 - (single - 1).leading_zeros()).max(1);
    let sub_bucket_count = 1u64 << sub_bucket_magnitude;
    let unit_magnitude = 63 - lowest.leading_zeros();
    // HdrHistogram refuses this too ("cannot represent sigfig worth of values beyond low"); past
    // it the shift below drops its bit, and a smallest untrackable value of 0 never ends the
    // loop (the flake finder's property test hung on lowest 2^55).
    if unit_magnitude + sub_bucket_magnitude - 1 > 61 {
        return None;
    }
    let mut smallest_untrackable = sub_bucket_count << unit_magnitude;
    let mut buckets = 1u64;
    while smallest_untrackable <= highest {
        if smallest_untrackable > u64::MAX / 2 {
            buckets += 1;
            break;
        }
        smallest_untrackable <<= 1;
        buckets += 1;
    }
    Some((buckets + 1) * (sub_bucket_count / 2))
}

/// The uncompressed V2 encoding of a V2 + DEFLATE histogram whose inner header matches
/// `config` (lowest, highest, digits) and stays within [`MAX_COUNTS`]; inflated no further than
/// the header allows.
fn inflate_checked(bytes: &[u8], config: (u64, u64, u8)) -> Result<Vec<u8>, HistError> {
    use std::io::Read;
    let word = |b: &[u8], at: usize| -> u32 { u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) };
    if bytes.len() < 8 || word(bytes, 0) != V2_COMPRESSED_COOKIE {
        return Err(bad("not an HDR V2 + DEFLATE encoding (cookie)".into()));
    }
    let declared = word(bytes, 4) as usize;
    if declared > bytes.len() - 8 {
        return Err(bad(format!("declares {declared} compressed bytes, and {} follow", bytes.len() - 8)));
    }
    let (lowest, highest, sigfig) = config;
    let counts = counts_len(lowest, highest, sigfig)
        .ok_or_else(|| bad(format!("no histogram has bounds {lowest}..{highest} with {sigfig} digits")))?;
    if counts > MAX_COUNTS {
        return Err(bad(format!(
            "bounds {lowest}..{highest} with {sigfig} digits need {counts} counts, over the {MAX_COUNTS} allowed"
        )));
    }
    let mut z = flate2::read::ZlibDecoder::new(&bytes[8..8 + declared]);
    let mut head = [0u8; 4 + V2_HEADER];
    z.read_exact(&mut head).map_err(|e| bad(format!("its header does not inflate: {e}")))?;
    let digits = word(&head, 12);
    let low = u64::from_be_bytes(head[16..24].try_into().unwrap_or_default());
    let high = u64::from_be_bytes(head[24..32].try_into().unwrap_or_default());
    if word(&head, 0) != V2_COOKIE || (low, high, digits) != (lowest, highest, sigfig as u32) {
        return Err(bad(format!(
            "its header ({low}..{high}, {digits} digits) is not the stated configuration ({lowest}..{highest}, \
             {sigfig} digits)"
        )));
    }
    // Each count takes at most 9 bytes (a LEB128 varint of 64 bits); runs of zeros take fewer.
    let payload = word(&head, 4) as u64;
    if payload > counts * 9 {
        return Err(bad(format!("declares {payload} payload bytes for {counts} counts (9 bytes each at most)")));
    }
    let mut plain = Vec::with_capacity(head.len() + payload as usize);
    plain.extend_from_slice(&head);
    z.take(payload).read_to_end(&mut plain).map_err(|e| bad(format!("its counts do not inflate: {e}")))?;
    if plain.len() as u64 != head.len() as u64 + payload {
        return Err(bad(format!("declares {payload} payload bytes, and {} inflate", plain.len() - head.len())));
    }
    Ok(plain)
}

/// A sum of histograms: the one accumulator every total goes through (the aggregator's per-way
/// latency and kernel RTT, a merge's every histogram). Empty until the first one is added; a
/// histogram of another configuration is refused.
#[derive(Debug, Clone, Default)]
pub struct HistSum(Option<Histogram<u64>>);

impl HistSum {
    /// Adds `h` (a copy when the sum is empty).
    pub fn add(&mut self, h: &Histogram<u64>) -> Result<(), HistError> {
        match &mut self.0 {
            Some(acc) => merge(acc, h),
            None => {
                self.0 = Some(h.clone());
                Ok(())
            }
        }
    }

    /// Adds a decoded histogram, taking it (no copy when the sum is empty).
    pub fn add_owned(&mut self, h: Histogram<u64>) -> Result<(), HistError> {
        match &mut self.0 {
            Some(acc) => merge(acc, &h),
            None => {
                self.0 = Some(h);
                Ok(())
            }
        }
    }

    /// The sum, if anything was added.
    pub fn histogram(&self) -> Option<&Histogram<u64>> {
        self.0.as_ref()
    }

    /// Its summary, if anything was added.
    pub fn summary(&self) -> Option<LatencySummary> {
        self.0.as_ref().map(LatencySummary::of)
    }

    /// Its encoding, if anything was added.
    pub fn encoded(&self) -> Option<EncodedHistogram> {
        self.0.as_ref().and_then(|h| EncodedHistogram::encode(h).ok())
    }

    /// Its summary with the histogram, if anything was added.
    pub fn distribution(&self) -> Option<Distribution> {
        self.0.as_ref().map(Distribution::of)
    }
}

/// Adds `src` into `dst` after checking that both have the same configuration.
pub fn merge(dst: &mut Histogram<u64>, src: &Histogram<u64>) -> Result<(), HistError> {
    if dst.low() != src.low() || dst.high() != src.high() || dst.sigfig() != src.sigfig() {
        return Err(HistError::Mismatch(format!(
            "[{}, {}] {} digits vs [{}, {}] {} digits",
            dst.low(),
            dst.high(),
            dst.sigfig(),
            src.low(),
            src.high(),
            src.sigfig()
        )));
    }
    dst.add(src).map_err(|e| HistError::Mismatch(format!("{e:?}")))
}

/// The value at percentile `p` (0 to 100) of a histogram: the one computation behind every
/// percentile netblast shows (the summaries, hey's distribution, the spectrum, `--assert`).
/// The percentile is taken to a hundredth of a per-mille and turned into the nearest quantile
/// once, so `99.9` and `0.999` never land on neighbouring buckets by rounding; 100 is the max.
pub fn at_percentile(h: &Histogram<u64>, p: f64) -> u64 {
    if p >= 100.0 {
        return h.max();
    }
    h.value_at_quantile((p * 1e4).round().max(0.0) / 1e6)
}

/// The latency percentiles reported everywhere, defined once.
pub const PERCENTILES: [f64; 7] = [50.0, 90.0, 95.0, 99.0, 99.9, 99.99, 100.0];

/// Summary statistics of a latency histogram, in ns.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample.
    pub min_ns: u64,
    /// Mean.
    pub mean_ns: f64,
    /// Standard deviation.
    pub stdev_ns: f64,
    /// Median.
    pub p50_ns: u64,
    /// 90th percentile.
    pub p90_ns: u64,
    /// 95th percentile.
    pub p95_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
    /// 99.99th percentile.
    pub p9999_ns: u64,
    /// Largest sample.
    pub max_ns: u64,
}

impl LatencySummary {
    /// Summarises a histogram (all zeros when it is empty).
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stdev_ns: h.stdev(),
            p50_ns: at_percentile(h, 50.0),
            p90_ns: at_percentile(h, 90.0),
            p95_ns: at_percentile(h, 95.0),
            p99_ns: at_percentile(h, 99.0),
            p999_ns: at_percentile(h, 99.9),
            p9999_ns: at_percentile(h, 99.99),
            max_ns: h.max(),
        }
    }
}

/// A distribution as a result stores it: its summary figures and, where kept, its histogram
/// (lossless, for exact merging and for any percentile). In JSON the summary's fields sit
/// beside `hist`, so `latency.p99_ns` reads as it did before histograms were nested.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Distribution {
    /// The summary figures.
    #[serde(flatten)]
    pub summary: LatencySummary,
    /// The histogram the summary was taken from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hist: Option<EncodedHistogram>,
}

impl Distribution {
    /// The summary of `h` and `h` itself, encoded (without it if it cannot be encoded).
    pub fn of(h: &Histogram<u64>) -> Distribution {
        Distribution { summary: LatencySummary::of(h), hist: EncodedHistogram::encode(h).ok() }
    }

    /// [`Distribution::of`] a histogram that holds samples; `None` for an empty one.
    pub fn if_any(h: &Histogram<u64>) -> Option<Distribution> {
        (!h.is_empty()).then(|| Distribution::of(h))
    }

    /// The decoded histogram, when one is kept and decodes.
    pub fn histogram(&self) -> Option<Histogram<u64>> {
        self.hist.as_ref().and_then(|e| e.decode().ok())
    }
}

/// The histogram of a distribution a result may lack: `None` when it lacks either.
pub fn hist_of(d: &Option<Distribution>) -> Option<&EncodedHistogram> {
    d.as_ref().and_then(|d| d.hist.as_ref())
}

impl std::ops::Deref for Distribution {
    type Target = LatencySummary;
    fn deref(&self) -> &LatencySummary {
        &self.summary
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_len_agrees_with_hdrhistogram_and_ends_on_any_bounds() {
        // What hdrhistogram itself sizes, for the configurations it accepts.
        for (lo, hi, sf) in
            [(1u64, 3_600_000_000_000u64, 3u8), (1, 100_000_000_000, 2), (1000, u64::MAX, 5), (7, 15, 0)]
        {
            let h = Histogram::<u64>::new_with_bounds(lo, hi, sf).unwrap();
            assert_eq!(counts_len(lo, hi, sf), Some(h.distinct_values() as u64), "{lo}..{hi}, {sf}");
        }
        // Found by the flake finder: a lowest of 2^55 shifted the bit out, and the sizing
        // loop never ended. Refused, as hdrhistogram refuses it.
        assert_eq!(counts_len(1 << 55, 6_724_800_003_587_096_096, 3), None);
        assert!(Histogram::<u64>::new_with_bounds(1 << 55, 6_724_800_003_587_096_096, 3).is_err());
        for shift in 0..64 {
            for sf in 0..=5 {
                let _ = counts_len(1u64 << shift, u64::MAX, sf);
            }
        }
    }

    #[test]
    fn roundtrip_is_lossless() {
        let mut h = new_latency_histogram();
        for v in [1_000u64, 2_000, 2_000, 50_000, 1_000_000, 3_000_000_000] {
            record_ns(&mut h, v);
        }
        let e = EncodedHistogram::encode(&h).unwrap();
        let json = serde_json::to_string(&e).unwrap();
        let back: EncodedHistogram = serde_json::from_str(&json).unwrap();
        let d = back.decode().unwrap();
        assert_eq!(d, h);
        assert_eq!(d.len(), 6);
    }

    #[test]
    fn merge_adds_counts_exactly() {
        let mut a = new_latency_histogram();
        let mut b = new_latency_histogram();
        for i in 0..1000u64 {
            record_ns(&mut a, 10_000 + i);
            record_ns(&mut b, 1_000_000 + i);
        }
        merge(&mut a, &b).unwrap();
        assert_eq!(a.len(), 2000);
        // The median of the union lies between the two clusters, which no average of the two
        // medians would tell: the union's p25 is in the low cluster and p75 in the high one.
        assert!(a.value_at_quantile(0.25) < 20_000);
        assert!(a.value_at_quantile(0.75) >= 1_000_000);
    }

    #[test]
    fn merge_refuses_other_precision() {
        let mut a = new_latency_histogram();
        let b = Histogram::<u64>::new_with_bounds(1, HIGHEST_NS, 2).unwrap();
        assert!(matches!(merge(&mut a, &b), Err(HistError::Mismatch(_))));
    }

    #[test]
    fn clamps_out_of_range() {
        let mut h = new_latency_histogram();
        record_ns(&mut h, 0);
        record_ns(&mut h, u64::MAX);
        assert_eq!(h.len(), 2);
        assert!(h.min() <= LOWEST_NS);
        assert!(h.max() >= HIGHEST_NS - HIGHEST_NS / 1000);
    }

    #[test]
    fn garbage_is_an_error() {
        let e = EncodedHistogram {
            unit: "ns".into(),
            lowest: 1,
            highest: HIGHEST_NS,
            sigfig: 3,
            count: 1,
            hdr_v2_deflate_b64: "bm90IGEgaGlzdG9ncmFt".into(),
        };
        assert!(e.decode().is_err());
    }
}
