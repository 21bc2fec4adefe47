//! The DSCP mark of a test's packets (`--dscp EF`, iperf3's `-S`/`--tos`): what firewalls,
//! QoS policies and load balancers classify by.
//!
//! A DSCP is the upper six bits of the IPv4 TOS byte and of the IPv6 traffic class; the lower
//! two are ECN, which TCP sets itself. Names are those of RFC 4594 and RFC 8622: `CS0`–`CS7`
//! (class selectors), `AF11`–`AF43` (assured forwarding, class and drop precedence), `EF`
//! (expedited forwarding, 46), `VA` (voice admit, 44), `LE` (lower effort, 1); or a number
//! 0–63 (decimal, or hex with `0x`).

use serde::{Deserialize, Deserializer, Serialize, Serializer, de};
use std::{fmt, str::FromStr};

/// A DSCP code point, 0–63.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dscp(u8);

impl Dscp {
    /// The code point, if `v` is one (0–63).
    pub fn new(v: u8) -> Option<Dscp> {
        (v < 64).then_some(Dscp(v))
    }

    /// The code point, 0–63.
    pub fn value(self) -> u8 {
        self.0
    }

    /// The TOS byte (IPv4) or traffic class (IPv6) that carries it, ECN bits clear.
    pub fn tos(self) -> u8 {
        self.0 << 2
    }

    /// From a TOS byte as iperf3's `-S` takes it (`0xb8`, `184`, octal `0270`): its upper six
    /// bits. ECN bits set are refused (TCP owns them; the kernel would overwrite them).
    pub fn from_tos(s: &str) -> Result<Dscp, String> {
        let t = s.trim();
        let v = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
            u8::from_str_radix(h, 16)
        } else if t.len() > 1 && t.starts_with('0') {
            u8::from_str_radix(&t[1..], 8)
        } else {
            t.parse::<u8>()
        }
        .map_err(|_| format!("{s:?} is not a TOS byte (0-255; 0x for hex, a leading 0 for octal)"))?;
        if v & 3 != 0 {
            return Err(format!(
                "TOS {v:#04x} sets the ECN bits (the low two), which TCP sets itself: give the DSCP, e.g. --dscp {} \
                 (TOS {:#04x})",
                Dscp(v >> 2),
                v & !3
            ));
        }
        Ok(Dscp(v >> 2))
    }

    /// The standard name of the code point, if it has one.
    pub fn name(self) -> Option<String> {
        match self.0 {
            46 => Some("EF".into()),
            44 => Some("VA".into()),
            1 => Some("LE".into()),
            v if v % 8 == 0 => Some(format!("CS{}", v / 8)),
            v if (1..=4).contains(&(v / 8)) && matches!(v % 8, 2 | 4 | 6) => Some(format!("AF{}{}", v / 8, v % 8 / 2)),
            _ => None,
        }
    }
}

impl FromStr for Dscp {
    type Err = String;

    fn from_str(s: &str) -> Result<Dscp, String> {
        let t = s.trim();
        let up = t.to_ascii_uppercase();
        let named = match up.as_str() {
            "EF" => Some(46),
            "VA" => Some(44),
            "LE" => Some(1),
            "BE" | "DF" => Some(0),
            _ => None,
        };
        let v = if let Some(v) = named {
            Some(v)
        } else if let Some(c) = up.strip_prefix("CS") {
            c.parse::<u8>().ok().filter(|&c| c <= 7).map(|c| c * 8)
        } else if let Some(af) = up.strip_prefix("AF") {
            let d: Vec<u8> = af.bytes().map(|b| b.wrapping_sub(b'0')).collect();
            match d[..] {
                [c @ 1..=4, p @ 1..=3] => Some(c * 8 + p * 2),
                _ => None,
            }
        } else if let Some(h) = up.strip_prefix("0X") {
            u8::from_str_radix(h, 16).ok()
        } else {
            t.parse::<u8>().ok()
        };
        v.and_then(Dscp::new)
            .ok_or_else(|| format!("{s:?} is not a DSCP: a name (EF, AF11-AF43, CS0-CS7, VA, LE) or a number 0-63"))
    }
}

impl fmt::Display for Dscp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n} ({})", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

impl Serialize for Dscp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl<'de> Deserialize<'de> for Dscp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            N(u64),
            S(String),
        }
        match Raw::deserialize(d)? {
            Raw::N(n) => u8::try_from(n)
                .ok()
                .and_then(Dscp::new)
                .ok_or_else(|| de::Error::custom(format!("DSCP {n} is outside 0-63"))),
            Raw::S(s) => s.parse().map_err(de::Error::custom),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_the_standard_code_points() {
        let v = |s: &str| s.parse::<Dscp>().map(Dscp::value);
        assert_eq!((v("EF"), v("ef"), v("46"), v("0x2e")), (Ok(46), Ok(46), Ok(46), Ok(46)));
        assert_eq!((v("AF11"), v("AF41"), v("AF43"), v("CS1"), v("CS7")), (Ok(10), Ok(34), Ok(38), Ok(8), Ok(56)));
        assert_eq!((v("VA"), v("LE"), v("BE")), (Ok(44), Ok(1), Ok(0)));
        for bad in ["AF51", "AF14", "CS8", "64", "-1", "EFX", ""] {
            assert!(v(bad).unwrap_err().contains("not a DSCP"), "{bad}");
        }
        assert_eq!(Dscp(34).to_string(), "AF41 (34)");
        assert_eq!(Dscp(46).to_string(), "EF (46)");
        assert_eq!(Dscp(13).to_string(), "13");
        assert_eq!(Dscp(46).tos(), 0xb8);
    }

    #[test]
    fn a_tos_byte_is_read_as_iperf3_reads_it_and_ecn_bits_are_refused() {
        assert_eq!(Dscp::from_tos("0xb8"), Ok(Dscp(46)));
        assert_eq!(Dscp::from_tos("184"), Ok(Dscp(46)));
        assert_eq!(Dscp::from_tos("0270"), Ok(Dscp(46)));
        let e = Dscp::from_tos("0xb9").unwrap_err();
        assert!(e.contains("ECN") && e.contains("--dscp EF (46)"), "{e}");
        assert!(Dscp::from_tos("256").unwrap_err().contains("not a TOS byte"));
    }

    #[test]
    fn it_is_kept_as_a_number_and_read_from_a_name_or_a_number() {
        assert_eq!(serde_json::to_string(&Dscp(46)).unwrap(), "46");
        assert_eq!(serde_json::from_str::<Dscp>("\"AF41\"").unwrap(), Dscp(34));
        assert_eq!(serde_json::from_str::<Dscp>("10").unwrap(), Dscp(10));
        assert!(serde_json::from_str::<Dscp>("64").unwrap_err().to_string().contains("outside 0-63"));
    }
}
