//! Profiles: one TOML file per scenario, one Rust file per TOML section.
//!
//! A profile is data. Loading checks syntax and types (unknown fields are errors, with the
//! line and column); [`Profile::validate`] checks the cross-field rules (every test is bounded,
//! the section matches the kind, numbers are in range). Resolving against the machine (CPUs,
//! addresses) happens later, in the engine.

mod bulk;
mod http;
mod msgrate;
mod rr;
mod run;
mod tcp;

pub use bulk::{BulkSection, Direction, SendMode, Way};
pub use http::{HttpSection, HttpVersion, RateStep};
pub use msgrate::{MsgrateSection, Protocol};
pub use rr::{RrSection, WaitMode};
pub use run::{Kind, RunSection};
pub use tcp::TcpSection;

use crate::error::SpecError;
use serde::{Deserialize, Serialize};
use std::{path::Path, time::Duration};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_profiles.rs"));
}

/// One test scenario as written in `configs/<name>.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// One line saying what the profile is for (shown by `netblast profiles`).
    pub description: String,
    /// `[run]`: kind, bounds, interval, CPUs.
    pub run: RunSection,
    /// `[tcp]`: socket options.
    #[serde(default)]
    pub tcp: TcpSection,
    /// `[bulk]`: parameters of the bulk kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bulk: Option<BulkSection>,
    /// `[msgrate]`: parameters of the msgrate kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub msgrate: Option<MsgrateSection>,
    /// `[rr]`: parameters of the rr kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rr: Option<RrSection>,
    /// `[http]`: parameters of the http kind.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpSection>,
}

/// A built-in profile: its name and description.
#[derive(Debug, Clone)]
pub struct BuiltinProfile {
    /// Name used with `--profile`.
    pub name: &'static str,
    /// The profile's one-line description.
    pub description: String,
}

/// Longest test a profile may ask for; a guard against typos like `duration = "10h"`.
pub const MAX_DURATION: Duration = Duration::from_secs(24 * 3600);
/// Upper bound applied when a test is bounded by a count only (e.g. `bulk.bytes`).
pub const COUNT_ONLY_TIME_CAP: Duration = Duration::from_secs(600);
/// Most flows one test may open.
pub const MAX_FLOWS: u32 = 16_384;

impl Profile {
    /// Parses a profile from TOML text; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Profile, SpecError> {
        toml::from_str(text)
            .map_err(|e| SpecError::Parse { origin: origin.to_string(), message: e.to_string().trim_end().to_string() })
    }

    /// Loads a built-in profile by name, or a file when `name_or_path` is a path.
    /// Returns the profile and the origin string used in messages.
    pub fn load(name_or_path: &str) -> Result<(Profile, String), SpecError> {
        let looks_like_path = name_or_path.contains('/') || name_or_path.ends_with(".toml");
        if !looks_like_path {
            if let Some((_, text)) = embedded::EMBEDDED.iter().find(|(n, _)| *n == name_or_path) {
                let origin = format!("built-in profile {name_or_path}");
                return Ok((Profile::from_toml(text, &origin)?, origin));
            }
        }
        let path = Path::new(name_or_path);
        if looks_like_path || path.is_file() {
            let text =
                std::fs::read_to_string(path).map_err(|source| SpecError::Read { path: path.to_path_buf(), source })?;
            let origin = path.display().to_string();
            return Ok((Profile::from_toml(&text, &origin)?, origin));
        }
        Err(SpecError::UnknownProfile {
            name: name_or_path.to_string(),
            available: embedded::EMBEDDED.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "),
        })
    }

    /// The profiles built into the binary, sorted by name. A built-in that fails to parse is
    /// listed with its error as description (the test suite makes sure none does).
    pub fn builtins() -> Vec<BuiltinProfile> {
        embedded::EMBEDDED
            .iter()
            .map(|(name, text)| BuiltinProfile {
                name,
                description: match Profile::from_toml(text, name) {
                    Ok(p) => p.description,
                    Err(e) => format!("(broken: {e})"),
                },
            })
            .collect()
    }

    /// The raw TOML of every built-in profile: (name, text).
    pub fn builtin_sources() -> &'static [(&'static str, &'static str)] {
        embedded::EMBEDDED
    }

    /// The `[bulk]` section in effect (defaults when absent).
    pub fn bulk(&self) -> BulkSection {
        self.bulk.clone().unwrap_or_default()
    }

    /// The `[msgrate]` section in effect (defaults when absent).
    pub fn msgrate(&self) -> MsgrateSection {
        self.msgrate.clone().unwrap_or_default()
    }

    /// The `[rr]` section in effect (defaults when absent).
    pub fn rr(&self) -> RrSection {
        self.rr.clone().unwrap_or_default()
    }

    /// The `[http]` section in effect (defaults when absent).
    pub fn http(&self) -> HttpSection {
        self.http.clone().unwrap_or_default()
    }

    /// Cross-field checks. `origin` names the file (or `command line`) in errors.
    pub fn validate(&self, origin: &str) -> Result<(), SpecError> {
        let invalid = |field: &str, message: String| SpecError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        if self.description.trim().is_empty() {
            return Err(invalid("description", "must say what the profile is for".into()));
        }
        let kind = self.run.kind;
        let present = [
            ("bulk", self.bulk.is_some(), Kind::Bulk),
            ("msgrate", self.msgrate.is_some(), Kind::Msgrate),
            ("rr", self.rr.is_some(), Kind::Rr),
            ("http", self.http.is_some(), Kind::Http),
        ];
        for (section, is_present, owner) in present {
            if is_present && owner != kind {
                return Err(invalid(
                    section,
                    format!("section [{section}] does not apply to run.kind = \"{}\"", kind.name()),
                ));
            }
        }
        if let Some(d) = self.run.duration {
            if d.get().is_zero() {
                return Err(invalid("run.duration", "must be greater than 0".into()));
            }
            if d.get() > MAX_DURATION {
                return Err(invalid("run.duration", format!("{d} is longer than the 24h limit")));
            }
        }
        let interval = self.run.interval();
        if interval < Duration::from_millis(10) {
            return Err(invalid("run.interval", "must be at least 10ms".into()));
        }
        if let Some(cpus) = &self.run.cpus {
            if cpus.0.is_empty() {
                return Err(invalid("run.cpus", "names no CPU".into()));
            }
        }
        if let Some(mss) = self.tcp.mss {
            if !(88..=65535).contains(&mss) {
                return Err(invalid("tcp.mss", format!("{mss} is outside 88..65535")));
            }
        }
        for (field, v) in
            [("tcp.window", self.tcp.window), ("tcp.sndbuf", self.tcp.sndbuf), ("tcp.rcvbuf", self.tcp.rcvbuf)]
        {
            if let Some(v) = v {
                if v.bytes() == 0 || v.bytes() > i32::MAX as u64 {
                    return Err(invalid(field, format!("{v} is outside 1..2GiB")));
                }
            }
        }
        if let Some(cc) = &self.tcp.congestion {
            if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(invalid("tcp.congestion", format!("{cc:?} is not a congestion control name")));
            }
        }
        match kind {
            Kind::Bulk => {
                let b = self.bulk();
                if b.flows == 0 || b.flows > MAX_FLOWS {
                    return Err(invalid("bulk.flows", format!("{} is outside 1..{MAX_FLOWS}", b.flows)));
                }
                if b.block_bytes.bytes() == 0 || b.block_bytes.bytes() > 64 << 20 {
                    return Err(invalid("bulk.block_bytes", format!("{} is outside 1..64MiB", b.block_bytes)));
                }
                if b.bytes.is_some_and(|n| n.bytes() == 0) {
                    return Err(invalid("bulk.bytes", "must be greater than 0".into()));
                }
                if self.run.duration.is_none() && b.bytes.is_none() {
                    return Err(invalid("run.duration", "a test needs a bound: set run.duration or bulk.bytes".into()));
                }
            }
            Kind::Msgrate => {
                let m = self.msgrate();
                if let Some(f) = m.flows {
                    if f == 0 || f > MAX_FLOWS {
                        return Err(invalid("msgrate.flows", format!("{f} is outside 1..{MAX_FLOWS}")));
                    }
                }
                let max = match m.protocol {
                    Protocol::Tcp => 1 << 20,
                    Protocol::Udp => MsgrateSection::MAX_UDP,
                };
                if m.msg_bytes.bytes() == 0 || m.msg_bytes.bytes() > max {
                    return Err(invalid("msgrate.msg_bytes", format!("{} is outside 1..{max}", m.msg_bytes)));
                }
                if m.batch == 0 || m.batch > 1024 {
                    return Err(invalid("msgrate.batch", format!("{} is outside 1..1024", m.batch)));
                }
                self.require_duration(&invalid)?;
            }
            Kind::Rr => {
                let r = self.rr();
                if r.flows == 0 || r.flows > MAX_FLOWS {
                    return Err(invalid("rr.flows", format!("{} is outside 1..{MAX_FLOWS}", r.flows)));
                }
                let max = match r.protocol {
                    Protocol::Tcp => 1 << 24,
                    Protocol::Udp => MsgrateSection::MAX_UDP,
                };
                for (field, v) in [("rr.req_bytes", r.req_bytes), ("rr.resp_bytes", r.resp_bytes)] {
                    if v.bytes() == 0 || v.bytes() > max {
                        return Err(invalid(field, format!("{v} is outside 1..{max}")));
                    }
                }
                if r.udp_timeout.is_some_and(|t| t.get() < Duration::from_millis(1)) {
                    return Err(invalid("rr.udp_timeout", "must be at least 1ms".into()));
                }
                self.require_duration(&invalid)?;
            }
            Kind::Http => {
                let h = self.http();
                h.check().map_err(|(field, message)| invalid(field, message))?;
                if self.run.duration.is_none() && h.requests.is_none() && h.steps.is_empty() {
                    return Err(invalid(
                        "run.duration",
                        "a test needs a bound: set run.duration, http.requests or http.steps".into(),
                    ));
                }
            }
        }
        Ok(())
    }

    fn require_duration(&self, invalid: &dyn Fn(&str, String) -> SpecError) -> Result<(), SpecError> {
        if self.run.duration.is_none() {
            return Err(invalid("run.duration", format!("a {} test needs run.duration", self.run.kind.name())));
        }
        Ok(())
    }

    /// The time bound in effect: `run.duration`, or [`COUNT_ONLY_TIME_CAP`] when only a count
    /// bounds the test.
    pub fn time_bound(&self) -> Duration {
        if let Some(d) = self.run.duration {
            return d.get();
        }
        if self.run.kind == Kind::Http && !self.http().steps.is_empty() {
            return self.http().steps_duration();
        }
        COUNT_ONLY_TIME_CAP
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
description = "one flow"
[run]
kind = "bulk"
duration = "10s"
[bulk]
flows = 4
direction = "reverse"
block_bytes = "128KiB"
"#;

    #[test]
    fn parses_and_validates() {
        let p = Profile::from_toml(GOOD, "t.toml").unwrap();
        p.validate("t.toml").unwrap();
        assert_eq!(p.bulk().flows, 4);
        assert_eq!(p.bulk().direction, Direction::Reverse);
        assert_eq!(p.bulk().block_bytes.bytes(), 128 * 1024);
        assert_eq!(p.time_bound(), Duration::from_secs(10));
    }

    #[test]
    fn http2_streams_are_checked() {
        let base = "description = \"h\"\n[run]\nkind = \"http\"\nduration = \"1s\"\n[http]\n";
        let check = |extra: &str| Profile::from_toml(&format!("{base}{extra}"), "h.toml").unwrap().validate("h.toml");
        check("version = \"http2\"\nstreams = 16\n").unwrap();
        for (extra, needle) in [
            ("streams = 16\n", "HTTP/2"),
            ("version = \"http2\"\nstreams = 0\n", "outside"),
            ("version = \"http2\"\nstreams = 4\nkeepalive = false\n", "keepalive"),
        ] {
            let e = check(extra).unwrap_err().to_string();
            assert!(e.contains("http.streams") && e.contains(needle), "{extra}: {e}");
        }
    }

    #[test]
    fn unknown_field_names_field_and_line() {
        let text = GOOD.replace("flows = 4", "flowz = 4");
        let e = Profile::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("t.toml"), "{e}");
        assert!(e.contains("flowz"), "{e}");
        assert!(e.contains("line 7"), "{e}");
    }

    #[test]
    fn bad_value_is_named() {
        let text = GOOD.replace("\"10s\"", "\"10 parsecs\"");
        let e = Profile::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("10 parsecs"), "{e}");
        let text = GOOD.replace("flows = 4", "flows = 0");
        let e = Profile::from_toml(&text, "t.toml").unwrap().validate("t.toml").unwrap_err().to_string();
        assert!(e.contains("bulk.flows"), "{e}");
    }

    #[test]
    fn unbounded_is_rejected() {
        let text = GOOD.replace("duration = \"10s\"", "");
        let e = Profile::from_toml(&text, "t.toml").unwrap().validate("t.toml").unwrap_err().to_string();
        assert!(e.contains("run.duration"), "{e}");
        let text = text.replace("flows = 4", "flows = 4\nbytes = \"1GiB\"");
        let p = Profile::from_toml(&text, "t.toml").unwrap();
        p.validate("t.toml").unwrap();
        assert_eq!(p.time_bound(), COUNT_ONLY_TIME_CAP);
    }

    #[test]
    fn every_builtin_profile_loads_and_validates() {
        assert!(!Profile::builtin_sources().is_empty());
        for (name, _) in Profile::builtin_sources() {
            let (p, origin) = Profile::load(name).unwrap();
            p.validate(&origin).unwrap();
        }
    }

    #[test]
    fn unknown_profile_lists_builtins() {
        let e = Profile::load("no-such-profile").unwrap_err().to_string();
        assert!(e.contains("bulk-1flow"), "{e}");
    }
}
