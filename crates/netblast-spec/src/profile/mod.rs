//! Profiles: one TOML file per scenario, one Rust file per TOML section.
//!
//! A profile is data. Loading checks syntax and types (unknown fields are errors, with the
//! line and column); [`Profile::validate`] checks the cross-field rules (every test is bounded,
//! the section matches the kind, numbers are in range). Resolving against the machine (CPUs,
//! addresses) happens later, in the engine.

mod bulk;
mod cps;
mod flags;
mod hold;
mod http;
mod msgrate;
mod overrides;
mod probe;
mod rr;
mod run;
mod section;
mod tcp;
mod workload;

pub use bulk::{BulkFlags, BulkSection, Direction, SendMode, Way};
pub use cps::{CloseMode, CpsFlags, CpsSection, DEFAULT_PORTS, ReadMode, TlsVersion, unescape};
pub use flags::{SharedFlags, parse_rate_range};
pub use hold::{HoldFlags, HoldSection};
pub use http::{HttpFlags, HttpSection, HttpVersion, MAX_BODY, RateStep, StatusSet, read_body_file};
pub use msgrate::{MsgrateFlags, MsgrateSection, Protocol, Receivers, RecvMode};
pub use overrides::{Overrides, is_url};
pub use probe::LatencyProbe;
pub use rr::{RrFlags, RrSection, WaitMode};
pub use run::RunSection;
pub use section::{Section, ServerPort};
pub use tcp::TcpSection;
pub use workload::{FieldError, Headline, Kind, KindFlags, Workload};

use crate::error::SpecError;
use crate::units::{CpuList, Dur};
use serde::{Deserialize, Serialize};
use std::{path::Path, time::Duration};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/embedded_profiles.rs"));
}

/// One test scenario, as written in `configs/<name>.toml`: a description, the run's bounds,
/// socket options and the workload (the kind with its parameters).
///
/// In the file (and on the wire, and in results) the kind is `run.kind` and its parameters are
/// the section of that name; any other kind's section is an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "ProfileFile", into = "ProfileFile")]
pub struct Profile {
    /// One line saying what the profile is for (shown by `netblast profiles`).
    pub description: String,
    /// `[run]`: bounds, interval, CPUs.
    pub run: RunSection,
    /// `[tcp]`: socket options.
    pub tcp: TcpSection,
    /// The kind and its section.
    pub workload: Workload,
}

/// The file form of a profile: `run.kind` plus the sections of kinds found, each under its
/// kind's name ([`Workload::read_section`]); the [`Profile`] is made of it once every key is
/// read, as a kind's section may come before `[run]`.
#[derive(Debug, Clone)]
struct ProfileFile {
    description: String,
    run: RunFile,
    tcp: TcpSection,
    sections: Vec<Workload>,
}

impl<'de> Deserialize<'de> for ProfileFile {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ProfileFile, D::Error> {
        d.deserialize_map(FileVisitor)
    }
}

/// Reads a profile file's keys: its own, and any kind's section (each deserialized where it
/// is, so its errors keep their place in the file).
struct FileVisitor;

impl<'de> serde::de::Visitor<'de> for FileVisitor {
    type Value = ProfileFile;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a profile (description, [run], [tcp] and its kind's section)")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<ProfileFile, A::Error> {
        use serde::de::Error;
        let (mut description, mut run, mut tcp, mut sections) = (None, None, None, Vec::<Workload>::new());
        let twice = |name: &str| A::Error::custom(format!("duplicate field `{name}`"));
        while let Some(key) = map.next_key_seed(KeySeed)? {
            match key {
                FileKey::Description if description.is_none() => description = Some(map.next_value()?),
                FileKey::Run if run.is_none() => run = Some(map.next_value()?),
                FileKey::Tcp if tcp.is_none() => tcp = Some(map.next_value()?),
                FileKey::Description | FileKey::Run | FileKey::Tcp => return Err(twice(key.name())),
                FileKey::Section(kind) if sections.iter().any(|w| w.kind() == kind) => return Err(twice(kind.name())),
                FileKey::Section(kind) => sections.extend(map.next_value_seed(SectionSeed(kind))?),
            }
        }
        Ok(ProfileFile {
            description: description.ok_or_else(|| A::Error::missing_field("description"))?,
            run: run.ok_or_else(|| A::Error::missing_field("run"))?,
            tcp: tcp.unwrap_or_default(),
            sections,
        })
    }
}

/// A key of a profile file.
#[derive(Clone, Copy)]
enum FileKey {
    Description,
    Run,
    Tcp,
    /// A kind's section.
    Section(Kind),
}

impl FileKey {
    fn name(self) -> &'static str {
        match self {
            FileKey::Description => "description",
            FileKey::Run => "run",
            FileKey::Tcp => "tcp",
            FileKey::Section(k) => k.name(),
        }
    }
}

/// Reads a key, refusing an unknown one where it is written (so the error points at it).
struct KeySeed;

impl<'de> serde::de::DeserializeSeed<'de> for KeySeed {
    type Value = FileKey;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<FileKey, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl serde::de::Visitor<'_> for KeySeed {
    type Value = FileKey;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a profile's key")
    }

    fn visit_str<E: serde::de::Error>(self, key: &str) -> Result<FileKey, E> {
        let own = [FileKey::Description, FileKey::Run, FileKey::Tcp];
        let all = || own.into_iter().chain(Kind::ALL.map(FileKey::Section));
        all().find(|k| k.name() == key).ok_or_else(|| {
            let names: Vec<String> = all().map(|k| format!("`{}`", k.name())).collect();
            E::custom(format!("unknown field `{key}`, expected one of {}", names.join(", ")))
        })
    }
}

/// Deserializes the section of one kind.
struct SectionSeed(Kind);

impl<'de> serde::de::DeserializeSeed<'de> for SectionSeed {
    type Value = Option<Workload>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Option<Workload>, D::Error> {
        Workload::read_section(self.0, d)
    }
}

impl Serialize for ProfileFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(3 + self.sections.len()))?;
        map.serialize_entry("description", &self.description)?;
        map.serialize_entry("run", &self.run)?;
        map.serialize_entry("tcp", &self.tcp)?;
        for w in &self.sections {
            w.write_section(&mut map)?;
        }
        map.end()
    }
}

/// `[run]` as written: the kind and the [`RunSection`] fields.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RunFile {
    kind: Kind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    duration: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interval: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cpus: Option<CpuList>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    omit: Option<Dur>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    latency_probe: Option<LatencyProbe>,
}

impl TryFrom<ProfileFile> for Profile {
    type Error = String;

    fn try_from(f: ProfileFile) -> Result<Profile, String> {
        let kind = f.run.kind;
        let mut workload = None;
        for w in f.sections {
            if w.kind() != kind {
                return Err(format!("section [{}] does not apply to run.kind = \"{}\"", w.kind().name(), kind.name()));
            }
            workload = Some(w);
        }
        Ok(Profile {
            description: f.description,
            run: RunSection {
                duration: f.run.duration,
                interval: f.run.interval,
                cpus: f.run.cpus,
                omit: f.run.omit,
                latency_probe: f.run.latency_probe,
            },
            tcp: f.tcp,
            workload: workload.unwrap_or_else(|| Workload::default_for(kind)),
        })
    }
}

impl From<Profile> for ProfileFile {
    fn from(p: Profile) -> ProfileFile {
        ProfileFile {
            description: p.description,
            run: RunFile {
                kind: p.workload.kind(),
                duration: p.run.duration,
                interval: p.run.interval,
                cpus: p.run.cpus,
                omit: p.run.omit,
                latency_probe: p.run.latency_probe,
            },
            tcp: p.tcp,
            sections: vec![p.workload],
        }
    }
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
/// Longest reporting interval (iperf3's `-i` stops at 60 s too): a server waits for a test's
/// start up to 30 s plus one interval, so the interval bounds how long a set-up may hold a slot.
pub const MAX_INTERVAL: Duration = Duration::from_secs(60);
/// Upper bound applied when a test is bounded by a count only (e.g. `bulk.bytes`).
pub const COUNT_ONLY_TIME_CAP: Duration = Duration::from_secs(600);
/// Most flows one test may open.
pub const MAX_FLOWS: u32 = 16_384;
/// Largest profile file read (a guard against `--profile /dev/zero`).
pub const MAX_PROFILE_BYTES: u64 = 1 << 20;

impl Profile {
    /// Parses a profile from TOML text; `origin` names the file in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Profile, SpecError> {
        toml::from_str(text).map_err(|e| SpecError::Parse { origin: origin.to_string(), message: toml_message(&e) })
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
            let text = read_bounded(path)?;
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

    /// The test kind.
    pub fn kind(&self) -> Kind {
        self.workload.kind()
    }

    /// Cross-field checks. `origin` names the file (or `command line`) in errors.
    pub fn validate(&self, origin: &str) -> Result<(), SpecError> {
        let invalid = |(field, message): FieldError| SpecError::Invalid {
            origin: origin.to_string(),
            field: field.to_string(),
            message,
        };
        self.check().map_err(invalid)
    }

    fn check(&self) -> Result<(), FieldError> {
        if self.description.trim().is_empty() {
            return Err(("description", "must say what the profile is for".into()));
        }
        if self.description.len() > crate::bounded::MAX_LINE {
            let (n, max) = (self.description.len(), crate::bounded::MAX_LINE);
            return Err(("description", format!("{n} bytes, over the limit of {max} (one line)")));
        }
        if let Some(d) = self.run.duration {
            if d.get().is_zero() {
                return Err(("run.duration", "must be greater than 0".into()));
            }
            if d.get() > MAX_DURATION {
                return Err(("run.duration", format!("{d} is longer than the 24h limit")));
            }
        }
        if self.run.interval() < Duration::from_millis(10) {
            return Err(("run.interval", "must be at least 10ms".into()));
        }
        if self.run.interval() > MAX_INTERVAL {
            return Err((
                "run.interval",
                format!("{} is longer than the {}s limit", Dur(self.run.interval()), MAX_INTERVAL.as_secs()),
            ));
        }
        if let Some(o) = self.run.omit {
            if !self.kind().takes_omit() {
                let takers: Vec<&str> = Kind::ALL.iter().filter(|k| k.takes_omit()).map(|k| k.name()).collect();
                return Err((
                    "run.omit",
                    format!("applies to {} tests; this profile's kind is {}", takers.join(", "), self.kind().name()),
                ));
            }
            if self.run.duration.is_none() {
                return Err((
                    "run.omit",
                    "needs run.duration: what is left out comes before a time, not a count".into(),
                ));
            }
            let iv = self.run.interval().as_nanos();
            if o.get().is_zero() || o.get().as_nanos() % iv != 0 {
                return Err((
                    "run.omit",
                    format!("{o} is not a whole number of reporting intervals ({})", Dur(self.run.interval())),
                ));
            }
        }
        if let Some(lp) = &self.run.latency_probe {
            lp.check(self.workload.section(), self.run.interval())?;
        }
        if self.run.cpus.as_ref().is_some_and(|c| c.0.is_empty()) {
            return Err(("run.cpus", "names no CPU".into()));
        }
        if let Some(mss) = self.tcp.mss {
            if !(88..=65535).contains(&mss) {
                return Err(("tcp.mss", format!("{mss} is outside 88..65535")));
            }
        }
        for (field, v) in
            [("tcp.window", self.tcp.window), ("tcp.sndbuf", self.tcp.sndbuf), ("tcp.rcvbuf", self.tcp.rcvbuf)]
        {
            if let Some(v) = v {
                if v.bytes() == 0 || v.bytes() > i32::MAX as u64 {
                    return Err((field, format!("{} bytes is outside 1..{} bytes", v.bytes(), i32::MAX)));
                }
            }
        }
        if let Some(cc) = &self.tcp.congestion {
            if cc.is_empty() || cc.len() > 15 || !cc.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Err(("tcp.congestion", format!("{cc:?} is not a congestion control name")));
            }
        }
        self.workload.check(&self.run)
    }

    /// The time bound in effect: `run.duration`, or [`COUNT_ONLY_TIME_CAP`] when only a count
    /// bounds the test.
    pub fn time_bound(&self) -> Duration {
        self.workload.time_bound(&self.run)
    }
}

/// The parser's message without the quoted source line: the line and column and what is wrong
/// (a file that is not a profile, say /etc/shadow, is not echoed).
fn toml_message(e: &toml::de::Error) -> String {
    let text = e.to_string();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with('|')
                || t.split_once(" |").is_some_and(|(n, _)| n.trim().chars().all(|c| c.is_ascii_digit())))
        })
        .collect();
    lines.join(": ").trim().to_string()
}

/// Reads a profile file, refusing anything that is not a regular file of sane size (a device
/// such as /dev/zero would never end) and never quoting a file that is not valid UTF-8 TOML.
fn read_bounded(path: &Path) -> Result<String, SpecError> {
    let read_err = |error: std::io::Error| SpecError::Read { path: path.to_path_buf(), error };
    let meta = std::fs::metadata(path).map_err(read_err)?;
    if !meta.is_file() {
        return Err(read_err(std::io::Error::other("not a regular file")));
    }
    if meta.len() > MAX_PROFILE_BYTES {
        return Err(read_err(std::io::Error::other(format!(
            "{} bytes is more than a profile may hold ({MAX_PROFILE_BYTES})",
            meta.len()
        ))));
    }
    let bytes = std::fs::read(path).map_err(read_err)?;
    String::from_utf8(bytes).map_err(|_| read_err(std::io::Error::other("not UTF-8 text: is this a profile?")))
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
        let Workload::Bulk(b) = &p.workload else { panic!("bulk") };
        assert_eq!(b.flows, 4);
        assert_eq!(b.direction, Direction::Reverse);
        assert_eq!(b.block_bytes.bytes(), 128 * 1024);
        assert_eq!(p.time_bound(), Duration::from_secs(10));
    }

    #[test]
    fn an_interval_past_60_s_is_refused_naming_the_field() {
        // Found in the audit: `interval = "1000000h"` made each set-up hold a server's slot
        // for 30 s plus the interval, and 256 of them locked new tests out.
        let mut p = Profile::from_toml(GOOD, "t.toml").unwrap();
        p.run.interval = Some("1000000h".parse().unwrap());
        let e = p.validate("t.toml").unwrap_err().to_string();
        assert!(e.contains("run.interval") && e.contains("60s limit"), "{e}");
        p.run.interval = Some("60s".parse().unwrap());
        p.validate("t.toml").unwrap();
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
    fn a_section_of_another_kind_is_an_error() {
        let text = GOOD
            .replace("[bulk]", "[rr]")
            .replace("direction = \"reverse\"\n", "")
            .replace("block_bytes = \"128KiB\"\n", "");
        let e = Profile::from_toml(&text, "t.toml").unwrap_err().to_string();
        assert!(e.contains("[rr]") && e.contains("bulk"), "{e}");
    }

    #[test]
    fn a_file_is_read_by_its_keys_in_any_order() {
        // The kind's section before [run]: read once [run] says the kind.
        let p = Profile::from_toml(
            "description = \"x\"\n[rr]\nflows = 3\n[run]\nkind = \"rr\"\nduration = \"1s\"\n",
            "t.toml",
        )
        .unwrap();
        assert!(matches!(&p.workload, Workload::Rr(r) if r.flows == 3), "{:?}", p.workload);
        // An unknown top-level key is named where it is written, with every key there is.
        let e = Profile::from_toml(&format!("{GOOD}\n[bulkk]\nflows = 2\n"), "t.toml").unwrap_err().to_string();
        assert!(e.contains("unknown field `bulkk`") && e.contains("`description`, `run`, `tcp`, `bulk`"), "{e}");
        assert!(e.contains(&format!("line {}", GOOD.lines().count() + 2)), "{e}");
        // In JSON (results, the wire): a null section is none; a key twice is refused.
        let json = r#"{"description":"x","run":{"kind":"cps","duration":"1s"},"bulk":null,"cps":{"flows":2}}"#;
        let p: Profile = serde_json::from_str(json).unwrap();
        assert!(matches!(&p.workload, Workload::Cps(c) if c.flows == Some(2)), "{:?}", p.workload);
        let twice = r#"{"description":"x","run":{"kind":"cps","duration":"1s"},"cps":{},"cps":{}}"#;
        let e = serde_json::from_str::<Profile>(twice).unwrap_err().to_string();
        assert!(e.contains("duplicate field `cps`"), "{e}");
        let e = serde_json::from_str::<Profile>(r#"{"run":{"kind":"cps"}}"#).unwrap_err().to_string();
        assert!(e.contains("missing field `description`"), "{e}");
    }

    #[test]
    fn file_form_roundtrips() {
        for (name, _) in Profile::builtin_sources() {
            let (p, _) = Profile::load(name).unwrap();
            let text = toml::to_string(&p).unwrap();
            assert_eq!(Profile::from_toml(&text, name).unwrap(), p, "{name}");
            let json = serde_json::to_string(&p).unwrap();
            assert!(json.contains(&format!("\"kind\":\"{}\"", p.kind().name())), "{json}");
            assert_eq!(serde_json::from_str::<Profile>(&json).unwrap(), p);
        }
    }

    #[test]
    fn parse_errors_name_the_line_without_quoting_it() {
        let e = Profile::from_toml("root:*:20228:0:99999:7:::\n", "/etc/shadow").unwrap_err().to_string();
        assert!(e.contains("line 1") && !e.contains("20228"), "{e}");
    }

    #[test]
    fn devices_and_binary_files_are_refused_without_quoting_them() {
        let e = Profile::load("/dev/zero").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "{e}");
        let dir = std::env::temp_dir().join(format!("nb-prof-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("bin.toml");
        std::fs::write(&f, [0xffu8, 0xfe, 0x00, 0x80]).unwrap();
        let e = Profile::load(f.to_str().unwrap()).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unknown_profile_lists_builtins() {
        let e = Profile::load("no-such-profile").unwrap_err().to_string();
        assert!(e.contains("bulk-1flow"), "{e}");
    }
}
