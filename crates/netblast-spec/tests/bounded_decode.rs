//! No input of at most 1 MB to a decoder of what peers and files hand netblast allocates more
//! than 64 MB (issue 39): HDR histograms (whose encodings declare their own lengths and
//! bounds) and whole results. A counting allocator measures the peak of each decode; this
//! binary runs its tests one at a time so that the peak is the decode's own.

use base64::Engine as _;
use netblast_spec::hist::{EncodedHistogram, new_latency_histogram, record_ns};
use proptest::prelude::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// One measurement at a time (the test harness runs tests on several threads).
static ONE: Mutex<()> = Mutex::new(());

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

const LIMIT: usize = 64 << 20;

/// Bounded in time too: the whole binary runs in a few seconds; past [`HANG`] a decode is
/// taken to loop (a sizing loop once did, on a lowest of 2^55) and the binary aborts, naming
/// it, rather than hang its suite.
const HANG: std::time::Duration = std::time::Duration::from_secs(120);

fn watchdog() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        std::thread::spawn(|| {
            std::thread::sleep(HANG);
            eprintln!("bounded_decode: still decoding after {HANG:?}: a decoder does not end on some input");
            std::process::abort();
        });
    });
}

/// The bytes `f` allocated at its peak above what was live when it began.
fn peak_of<T>(f: impl FnOnce() -> T) -> (T, usize) {
    watchdog();
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    (out, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

/// A valid encoding of a histogram with some samples, as raw bytes (base64 decoded).
fn valid() -> (EncodedHistogram, Vec<u8>) {
    let mut h = new_latency_histogram();
    for v in [1_000u64, 20_000, 300_000, 4_000_000, 50_000_000] {
        record_ns(&mut h, v);
    }
    let e = EncodedHistogram::encode(&h).unwrap();
    let raw = base64::engine::general_purpose::STANDARD.decode(&e.hdr_v2_deflate_b64).unwrap();
    (e, raw)
}

fn with_bytes(e: &EncodedHistogram, raw: &[u8]) -> EncodedHistogram {
    EncodedHistogram { hdr_v2_deflate_b64: base64::engine::general_purpose::STANDARD.encode(raw), ..e.clone() }
}

/// zlib of `plain` (the inner V2 encoding), wrapped as V2 + DEFLATE.
fn wrap(plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    z.write_all(plain).unwrap();
    let body = z.finish().unwrap();
    let mut out = (0x1c84_9304u32 | 0x10).to_be_bytes().to_vec();
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// An inner V2 header declaring `payload` bytes and the given configuration, and no counts.
fn inner(payload: u32, lowest: u64, highest: u64, digits: u32) -> Vec<u8> {
    let mut v = (0x1c84_9303u32 | 0x10).to_be_bytes().to_vec();
    v.extend_from_slice(&payload.to_be_bytes());
    v.extend_from_slice(&0u32.to_be_bytes());
    v.extend_from_slice(&digits.to_be_bytes());
    v.extend_from_slice(&lowest.to_be_bytes());
    v.extend_from_slice(&highest.to_be_bytes());
    v.extend_from_slice(&1.0f64.to_be_bytes());
    v
}

#[test]
fn a_60_byte_histogram_that_declares_4_gb_is_refused_without_allocating_it() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (e, _) = valid();
    // The audit's case: a payload length of 4 GB in a few bytes.
    let raw = wrap(&inner(u32::MAX, 1, 100_000_000_000, 3));
    assert!(raw.len() < 100, "{} bytes", raw.len());
    let (r, peak) = peak_of(|| with_bytes(&e, &raw).decode());
    let err = r.unwrap_err().to_string();
    assert!(err.contains("payload"), "{err}");
    assert!(peak < 1 << 20, "a {}-byte histogram allocated {peak} bytes", raw.len());
    // Bounds that need a huge counts array, stated consistently in both places.
    let raw = wrap(&inner(0, 1, u64::MAX, 5));
    let wide = EncodedHistogram { highest: u64::MAX, sigfig: 5, ..e.clone() };
    let (r, peak) = peak_of(|| with_bytes(&wide, &raw).decode());
    assert!(r.unwrap_err().to_string().contains("counts"));
    assert!(peak < 1 << 20, "{peak} bytes");
    // The outer length past the bytes there are.
    let mut raw = wrap(&inner(0, 1, 100_000_000_000, 3));
    raw[4..8].copy_from_slice(&u32::MAX.to_be_bytes());
    let (r, peak) = peak_of(|| with_bytes(&e, &raw).decode());
    assert!(r.unwrap_err().to_string().contains("compressed bytes"));
    assert!(peak < 1 << 20, "{peak} bytes");
    // A header that is not the stated configuration.
    let raw = wrap(&inner(0, 1, 1_000_000, 3));
    assert!(with_bytes(&e, &raw).decode().unwrap_err().to_string().contains("stated configuration"));
}

#[test]
fn a_valid_histogram_still_decodes_exactly() {
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let (e, _) = valid();
    let h = e.decode().unwrap();
    assert_eq!(h.len(), 5);
    assert_eq!(h.value_at_quantile(1.0), h.highest_equivalent(50_000_000));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, failure_persistence: None, ..ProptestConfig::default() })]

    /// Any header fields and configuration, any truncation or extra bytes: bounded.
    #[test]
    fn any_header_and_configuration_decodes_within_bounds(
        payload in any::<u32>(),
        outer in proptest::option::of(any::<u32>()),
        lowest in prop_oneof![Just(1u64), any::<u64>()],
        highest in prop_oneof![Just(100_000_000_000u64), Just(u64::MAX), any::<u64>()],
        digits in 0u32..8,
        cut in 0usize..64,
        tail in proptest::collection::vec(any::<u8>(), 0..2048),
    ) {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let mut plain = inner(payload, lowest, highest, digits);
        plain.extend_from_slice(&tail);
        let mut raw = wrap(&plain);
        if let Some(n) = outer {
            raw[4..8].copy_from_slice(&n.to_be_bytes());
        }
        raw.truncate(raw.len().saturating_sub(cut));
        let e = EncodedHistogram {
            unit: "ns".into(),
            lowest,
            highest,
            sigfig: digits.min(255) as u8,
            count: 0,
            hdr_v2_deflate_b64: base64::engine::general_purpose::STANDARD.encode(&raw),
        };
        let (_, peak) = peak_of(|| e.decode());
        prop_assert!(peak < LIMIT, "{} input bytes allocated {peak}", raw.len());
    }

    /// Random bytes up to 1 MB, as a histogram and as a whole result document.
    #[test]
    fn random_bytes_decode_within_bounds(bytes in proptest::collection::vec(any::<u8>(), 0..(1 << 20))) {
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        let (e, _) = valid();
        let (_, peak) = peak_of(|| with_bytes(&e, &bytes).decode());
        prop_assert!(peak < LIMIT, "{} bytes as a histogram allocated {peak}", bytes.len());
        let (_, peak) = peak_of(|| serde_json::from_slice::<netblast_spec::RunResult>(&bytes).map(|_| ()));
        prop_assert!(peak < LIMIT, "{} bytes as a result allocated {peak}", bytes.len());
    }
}
