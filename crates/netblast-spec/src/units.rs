//! Units: byte sizes, rates, durations and CPU lists as users write them, plus the
//! human renderings (iperf3 style) used by the text report.
//!
//! Sizes: `1500`, `128KiB`, `128K`, `1MiB`, `1M`, `4GiB` are binary (powers of 1024, as in
//! iperf3's `-l 128K`); `10KB`, `10MB`, `10GB` are decimal (powers of 1000).
//! Rates: `5000`, `5000/s`, `10k/s`, `1.5M/s` (decimal multipliers, per second).

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};
use std::{fmt, str::FromStr, time::Duration};

/// Why a unit string could not be read; the caller adds the field or flag name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {what} {value:?}: expected {expected}")]
pub struct UnitError {
    /// What kind of value was expected ("size", "rate", ...).
    pub what: &'static str,
    /// The text that was given.
    pub value: String,
    /// The syntax that would have been accepted.
    pub expected: &'static str,
}

fn split_number(s: &str) -> (&str, &str) {
    let end = s.char_indices().find(|(_, c)| !(c.is_ascii_digit() || *c == '.')).map(|(i, _)| i).unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

/// A number with an optional suffix from `suffixes` (suffix, multiplier); `None` when either
/// part is not one, or the product is not finite.
fn scaled(t: &str, suffixes: &[(&str, f64)]) -> Option<f64> {
    let (num, unit) = split_number(t);
    let n: f64 = num.parse().ok()?;
    let m = if unit.is_empty() { 1.0 } else { suffixes.iter().find(|(s, _)| *s == unit)?.1 };
    Some(n * m).filter(|v| v.is_finite())
}

/// Deserializes a rate-like unit written either as a number (> 0) or as text its `FromStr`
/// takes; `what` names it in the error.
fn number_or_text<'de, D, T>(d: D, what: &str, from_number: fn(f64) -> T) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        N(f64),
        S(String),
    }
    match Raw::deserialize(d)? {
        Raw::N(n) if n > 0.0 && n.is_finite() => Ok(from_number(n)),
        Raw::N(n) => Err(de::Error::custom(format!("invalid {what} {n}: must be > 0"))),
        Raw::S(s) => s.parse().map_err(de::Error::custom),
    }
}

/// Decimal suffixes of event and bit rates.
const DECIMAL: [(&str, f64); 6] = [("k", 1e3), ("K", 1e3), ("M", 1e6), ("m", 1e6), ("G", 1e9), ("g", 1e9)];

/// A byte count such as a buffer size or a transfer bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The size in bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }

    /// The size as a buffer length (profiles bound every size far below `usize::MAX`;
    /// saturates where a `usize` is narrower than 64 bits).
    pub fn to_usize(self) -> usize {
        usize::try_from(self.0).unwrap_or(usize::MAX)
    }
}

impl FromStr for ByteSize {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError {
            what: "size",
            value: s.to_string(),
            expected: "<n>[K|KiB|M|MiB|G|GiB|KB|MB|GB], e.g. 128KiB",
        };
        let t = s.trim();
        let (num, unit) = split_number(t);
        if num.is_empty() {
            return Err(err());
        }
        let n: f64 = num.parse().map_err(|_| err())?;
        let mult: f64 = match unit {
            "" | "B" | "b" => 1.0,
            "K" | "k" | "KiB" | "kiB" => 1024.0,
            "M" | "m" | "MiB" => 1024.0 * 1024.0,
            "G" | "g" | "GiB" => 1024.0 * 1024.0 * 1024.0,
            "T" | "t" | "TiB" => 1024.0f64.powi(4),
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "TB" => 1e12,
            _ => return Err(err()),
        };
        let v = n * mult;
        if !v.is_finite() || v < 0.0 || v > u64::MAX as f64 || (v.fract() != 0.0 && unit.is_empty()) {
            return Err(err());
        }
        Ok(ByteSize(v.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        for (unit, div) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
            if b >= div && b % div == 0 {
                return write!(f, "{}{unit}", b / div);
            }
        }
        write!(f, "{b}")
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => Ok(ByteSize(n)),
            Raw::S(s) => s.parse().map_err(de::Error::custom),
        }
    }
}

/// An event rate in events per second (requests/s, messages/s).
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Rate(pub f64);

impl Rate {
    /// Events per second.
    pub fn per_second(self) -> f64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError {
            what: "rate",
            value: s.to_string(),
            expected: "<n>/s with an optional k or M, e.g. 5000/s or 10k/s",
        };
        let t = s.trim();
        let t = t.strip_suffix("/s").unwrap_or(t).trim();
        // "g" is a bit rate's spelling; an event rate takes "G" only.
        let v = scaled(t, &DECIMAL[..5]).filter(|v| *v > 0.0).ok_or_else(err)?;
        Ok(Rate(v))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/s", self.0)
    }
}

impl Serialize for Rate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_text(d, "rate", Rate)
    }
}

/// A bit rate in bits per second, written as iperf3's `-b` takes it: `1G`, `200M`, `500k`,
/// `1Gbit/s`, `100Mbps` (powers of 1000; bits, not bytes); `0` means no limit.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct BitRate(pub f64);

impl BitRate {
    /// Bits per second.
    pub fn bits_per_s(self) -> f64 {
        self.0
    }
}

impl FromStr for BitRate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError {
            what: "bit rate",
            value: s.to_string(),
            expected: "bits per second with an optional k, M or G, e.g. 200M, 1G, 1Gbit/s",
        };
        let t = s.trim();
        let t = ["bit/s", "bits/s", "bps", "b/s"].iter().find_map(|u| t.strip_suffix(u)).unwrap_or(t).trim();
        let suffixes: Vec<(&str, f64)> = DECIMAL.iter().copied().chain([("T", 1e12)]).collect();
        // 0 is iperf3's "no limit".
        let v = scaled(t, &suffixes).filter(|v| *v >= 0.0).ok_or_else(err)?;
        Ok(BitRate(v))
    }
}

/// `-b`: one bit rate, a range `LOW..HIGH` that `--find-max` searches, or `UP/DOWN`: the
/// client-to-server flows' rate and the server-to-client flows' (`--bidir`, `-R`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BitRateArg {
    /// The rate (the range's low end; with `UP/DOWN`, the up rate).
    pub from: BitRate,
    /// The range's high end.
    pub to: Option<BitRate>,
    /// `UP/DOWN`: the server-to-client flows' rate.
    pub down: Option<BitRate>,
}

impl BitRateArg {
    /// One rate.
    pub fn one(r: BitRate) -> BitRateArg {
        BitRateArg { from: r, to: None, down: None }
    }
}

impl FromStr for BitRateArg {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some((up, down)) = s.split_once('/') {
            if s.contains("..") {
                return Err(UnitError {
                    what: "bit rate",
                    value: s.to_string(),
                    expected: "a rate per way UP/DOWN (1G/200M) or a range LOW..HIGH, not both",
                });
            }
            return Ok(BitRateArg { from: up.parse()?, to: None, down: Some(down.parse()?) });
        }
        Ok(match s.split_once("..") {
            Some((a, b)) => BitRateArg { from: a.parse()?, to: Some(b.parse()?), down: None },
            None => BitRateArg { from: s.parse()?, to: None, down: None },
        })
    }
}

impl fmt::Display for BitRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&fmt_bits_per_s(self.0))
    }
}

impl Serialize for BitRate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(self.0)
    }
}

impl<'de> Deserialize<'de> for BitRate {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        number_or_text(d, "bit rate", BitRate)
    }
}

/// A duration written as a humantime string (`"10s"`, `"250ms"`, `"5m"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Dur(pub Duration);

impl Dur {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl FromStr for Dur {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError {
            what: "duration",
            value: s.to_string(),
            expected: "seconds or a number with a unit, e.g. 10, 10s, 250ms, 5m",
        };
        let t = s.trim();
        // A bare number means seconds, as in iperf3's -t 10.
        if let Ok(secs) = t.parse::<f64>() {
            return Duration::try_from_secs_f64(secs).map(Dur).map_err(|_| err());
        }
        humantime::parse_duration(t).map(Dur).map_err(|_| err())
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(de::Error::custom)
    }
}

/// A set of CPU numbers written as a list (`"0-3,6"`), kept sorted and unique.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuList(pub Vec<usize>);

impl FromStr for CpuList {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError {
            what: "CPU list",
            value: s.to_string(),
            expected: "comma-separated CPU numbers or ranges, e.g. 0-3,6",
        };
        let mut cpus = Vec::new();
        for part in s.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(err());
            }
            match part.split_once('-') {
                Some((a, b)) => {
                    let a: usize = a.trim().parse().map_err(|_| err())?;
                    let b: usize = b.trim().parse().map_err(|_| err())?;
                    if a > b || b - a > 4096 {
                        return Err(err());
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(part.parse().map_err(|_| err())?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl Serialize for CpuList {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de> Deserialize<'de> for CpuList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            L(Vec<usize>),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::L(mut v) => {
                v.sort_unstable();
                v.dedup();
                Ok(CpuList(v))
            }
            Raw::S(s) => s.parse().map_err(de::Error::custom),
        }
    }
}

/// A figure that may not have been measured: its rendering, or "—" (unknown is not zero).
pub fn known<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or_else(|| "\u{2014}".to_string(), |x| x.to_string())
}

/// A share written as a percentage (`5%`, `2.5%`) or a fraction (`0.05`); the caller bounds it.
pub fn parse_share(s: &str) -> Result<f64, String> {
    match s.trim().strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|v| v / 100.0),
        None => s.trim().parse::<f64>(),
    }
    .map_err(|_| format!("{s:?} is not a share: 5% or 0.05"))
}

/// Three significant digits, as iperf3 prints its figures (`4.56`, `39.2`, `964`): the one
/// number format of every scaled figure netblast prints.
pub fn sig3(v: f64) -> String {
    let a = v.abs();
    if a < 9.995 {
        format!("{v:.2}")
    } else if a < 99.95 {
        format!("{v:.1}")
    } else {
        format!("{v:.0}")
    }
}

/// `v` scaled by the largest of `steps` (factor, unit; ascending) it reaches, in three
/// significant digits; a value that would round up to 1000 of one unit takes the next.
fn in_steps(v: f64, steps: &[(f64, &str)]) -> String {
    let mut pick = steps[0];
    for &(f, u) in steps {
        if v.abs() >= f * 0.9995 {
            pick = (f, u);
        }
    }
    format!("{} {}", sig3(v / pick.0), pick.1)
}

/// Renders a byte count the way iperf3 does (`4.56 GBytes`, powers of 1024; whole bytes
/// below 1 KByte).
pub fn fmt_bytes(b: u64) -> String {
    if b < 1024 {
        return format!("{b} Bytes");
    }
    in_steps(b as f64, &[(1.0, "Bytes"), (1024.0, "KBytes"), (1048576.0, "MBytes"), (1073741824.0, "GBytes")])
}

/// Renders a bit rate the way iperf3 does (`39.2 Gbits/sec`, powers of 1000).
pub fn fmt_bits_per_s(bps: f64) -> String {
    in_steps(bps, &[(1.0, "bits/sec"), (1e3, "Kbits/sec"), (1e6, "Mbits/sec"), (1e9, "Gbits/sec"), (1e12, "Tbits/sec")])
}

/// Renders a count per second with a k/M suffix (`2.03 M/s`, `964 k/s`, `12.5 /s`).
pub fn fmt_per_s(v: f64) -> String {
    in_steps(v, &[(1.0, "/s"), (1e3, "k/s"), (1e6, "M/s"), (1e9, "G/s")])
}

/// Renders nanoseconds with a readable unit (`850 ns`, `12.3 us`, `4.10 ms`, `1.20 s`).
pub fn fmt_ns(ns: f64) -> String {
    in_steps(ns, &[(1.0, "ns"), (1e3, "us"), (1e6, "ms"), (1e9, "s")])
}

/// A network: an address and a prefix length (`10.0.0.0/8`, `fd00::/8`; a bare address is a
/// network of one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Cidr {
    /// The network's address (host bits cleared).
    pub addr: std::net::IpAddr,
    /// Prefix length.
    pub prefix: u8,
}

impl Cidr {
    /// The network of `addr` with `prefix` bits (clamped to the family's width).
    pub fn new(addr: std::net::IpAddr, prefix: u8) -> Cidr {
        let prefix = prefix.min(if addr.is_ipv4() { 32 } else { 128 });
        Cidr { addr: mask(addr, prefix), prefix }
    }

    /// Whether `ip` is inside (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        let ip = match ip {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4).unwrap_or(ip),
            v4 => v4,
        };
        ip.is_ipv4() == self.addr.is_ipv4() && mask(ip, self.prefix) == self.addr
    }
}

fn mask(ip: std::net::IpAddr, prefix: u8) -> std::net::IpAddr {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(a) => {
            let m = if prefix == 0 { 0 } else { u32::MAX << (32 - prefix as u32) };
            IpAddr::V4((u32::from(a) & m).into())
        }
        IpAddr::V6(a) => {
            let m = if prefix == 0 { 0 } else { u128::MAX << (128 - prefix as u32) };
            IpAddr::V6((u128::from(a) & m).into())
        }
    }
}

impl FromStr for Cidr {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || UnitError { what: "network", value: s.to_string(), expected: "ADDRESS/PREFIX, e.g. 10.0.0.0/8" };
        let (a, p) = s.trim().split_once('/').unwrap_or((s.trim(), ""));
        let addr: std::net::IpAddr = a.parse().map_err(|_| err())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = if p.is_empty() { max } else { p.parse::<u8>().map_err(|_| err())? };
        if prefix > max {
            return Err(err());
        }
        Ok(Cidr::new(addr, prefix))
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// RFC 3339 (UTC, to the nanosecond) of an instant in ns since the Unix epoch.
pub fn fmt_rfc3339(unix_ns: u64) -> String {
    humantime::format_rfc3339_nanos(std::time::UNIX_EPOCH + Duration::from_nanos(unix_ns)).to_string()
}

/// Parses an instant: RFC 3339 (`2026-11-23T10:00:00Z`, fractions allowed), Unix seconds
/// (`1795000000`, `1795000000.5`), or `+DURATION` from `now_ns` (`+5s`). Returns UTC ns.
pub fn parse_instant(s: &str, now_ns: u64) -> Result<u64, UnitError> {
    let err = || UnitError {
        what: "instant",
        value: s.to_string(),
        expected: "RFC 3339 (2026-11-23T10:00:00Z), Unix seconds, or +DURATION (+5s)",
    };
    let t = s.trim();
    if let Some(rel) = t.strip_prefix('+') {
        let d: Dur = rel.parse().map_err(|_| err())?;
        return Ok(now_ns.saturating_add(d.get().as_nanos() as u64));
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        // Exact to the nanosecond: whole seconds and up to nine fraction digits, no float.
        let (whole, frac) = t.split_once('.').unwrap_or((t, ""));
        if whole.is_empty() || whole.len() > 11 || frac.len() > 9 || frac.contains('.') {
            return Err(err());
        }
        let secs: u64 = whole.parse().map_err(|_| err())?;
        let ns: u64 = if frac.is_empty() { 0 } else { format!("{frac:0<9}").parse().map_err(|_| err())? };
        return Ok(secs * 1_000_000_000 + ns);
    }
    let at = humantime::parse_rfc3339_weak(t).map_err(|_| err())?;
    at.duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).map_err(|_| err())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_rates_as_iperf3_takes_them() {
        for (t, v) in
            [("1G", 1e9), ("200M", 200e6), ("500k", 500e3), ("1Gbit/s", 1e9), ("100Mbps", 100e6), ("64", 64.0)]
        {
            assert_eq!(t.parse::<BitRate>().unwrap().0, v, "{t}");
        }
        assert_eq!("0".parse::<BitRate>().unwrap().0, 0.0, "0: no limit, as iperf3");
        for bad in ["", "G", "-1M", "1GB"] {
            assert!(bad.parse::<BitRate>().is_err(), "{bad}");
        }
    }

    #[test]
    fn networks_contain_their_addresses() {
        let n: Cidr = "10.1.2.3/16".parse().unwrap();
        assert_eq!(n.to_string(), "10.1.0.0/16");
        assert!(n.contains("10.1.200.9".parse().unwrap()));
        assert!(!n.contains("10.2.0.1".parse().unwrap()));
        assert!(n.contains("::ffff:10.1.0.7".parse().unwrap()), "IPv4-mapped");
        let one: Cidr = "127.0.0.1".parse().unwrap();
        assert!(one.contains("127.0.0.1".parse().unwrap()) && !one.contains("127.0.0.2".parse().unwrap()));
        let v6: Cidr = "fd00::/8".parse().unwrap();
        assert!(v6.contains("fd12::1".parse().unwrap()) && !v6.contains("fe80::1".parse().unwrap()));
        let all: Cidr = "0.0.0.0/0".parse().unwrap();
        assert!(all.contains("8.8.8.8".parse().unwrap()) && !all.contains("::1".parse().unwrap()));
        for bad in ["10.0.0.0/33", "x/8", "10.0.0.0/y"] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn instants_parse_three_ways() {
        assert_eq!(parse_instant("2026-11-23T10:00:00Z", 0).unwrap(), 1_795_428_000_000_000_000);
        assert_eq!(parse_instant("2026-11-23T10:00:00.5Z", 0).unwrap(), 1_795_428_000_500_000_000);
        assert_eq!(parse_instant("1795428000", 0).unwrap(), 1_795_428_000_000_000_000);
        assert_eq!(parse_instant("1795428000.223", 0).unwrap(), 1_795_428_000_223_000_000, "exact, no float");
        assert_eq!(parse_instant("+2s", 10).unwrap(), 2_000_000_010);
        assert!(parse_instant("tomorrow", 0).unwrap_err().to_string().contains("RFC 3339"));
        assert!(parse_instant("-5", 0).is_err());
    }

    #[test]
    fn sizes() {
        assert_eq!("1500".parse::<ByteSize>().unwrap().0, 1500);
        assert_eq!("128K".parse::<ByteSize>().unwrap().0, 131072);
        assert_eq!("128KiB".parse::<ByteSize>().unwrap().0, 131072);
        assert_eq!("1MiB".parse::<ByteSize>().unwrap().0, 1 << 20);
        assert_eq!("10MB".parse::<ByteSize>().unwrap().0, 10_000_000);
        assert_eq!("1.5GiB".parse::<ByteSize>().unwrap().0, 3 << 29);
        assert!("12x".parse::<ByteSize>().is_err());
        assert!("".parse::<ByteSize>().is_err());
        assert!("-5".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(131072).to_string(), "128KiB");
    }

    #[test]
    fn rates() {
        assert_eq!("5000/s".parse::<Rate>().unwrap().0, 5000.0);
        assert_eq!("10k/s".parse::<Rate>().unwrap().0, 10000.0);
        assert_eq!("50".parse::<Rate>().unwrap().0, 50.0);
        let e = "10k/x".parse::<Rate>().unwrap_err();
        assert!(e.to_string().contains("10k/x"), "{e}");
        assert!("0/s".parse::<Rate>().is_err());
    }

    #[test]
    fn durations() {
        assert_eq!("10".parse::<Dur>().unwrap().0, Duration::from_secs(10));
        assert_eq!("0.5".parse::<Dur>().unwrap().0, Duration::from_millis(500));
        assert_eq!("250ms".parse::<Dur>().unwrap().0, Duration::from_millis(250));
        assert!("-1".parse::<Dur>().is_err());
        assert!("ten".parse::<Dur>().is_err());
    }

    #[test]
    fn cpu_lists() {
        assert_eq!("0-3,6".parse::<CpuList>().unwrap().0, vec![0, 1, 2, 3, 6]);
        assert_eq!("3,1,1".parse::<CpuList>().unwrap().0, vec![1, 3]);
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("a".parse::<CpuList>().is_err());
        assert!("1,,2".parse::<CpuList>().is_err());
        assert_eq!(CpuList(vec![0, 1, 2, 5, 7, 8]).to_string(), "0-2,5,7-8");
    }

    #[test]
    fn renderings() {
        assert_eq!(fmt_bytes(4_896_000_000), "4.56 GBytes");
        assert_eq!(fmt_bits_per_s(39.2e9), "39.2 Gbits/sec");
        assert_eq!(
            (fmt_per_s(963_980.0), fmt_per_s(1_019_000.0), fmt_per_s(999_700.0)),
            ("964 k/s".into(), "1.02 M/s".into(), "1.00 M/s".into())
        );
        assert_eq!(
            (fmt_ns(999_600.0), fmt_ns(-721.0), fmt_ns(4_743_000.0)),
            ("1.00 ms".into(), "-721 ns".into(), "4.74 ms".into())
        );
        assert_eq!(
            (fmt_bytes(999), fmt_bytes(1023), fmt_bytes(1024)),
            ("999 Bytes".into(), "1023 Bytes".into(), "1.00 KBytes".into())
        );
        assert_eq!(fmt_ns(12_345.0), "12.3 us");
    }
}
