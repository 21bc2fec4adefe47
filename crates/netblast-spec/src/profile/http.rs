//! `[http]`: HTTP/1.1, HTTP/2 and HTTPS request floods (hey, wrk, wrk2, vegeta), closed loop
//! (as fast as responses come back) or open loop (requests at intended times, latency from the
//! intended time).

use super::RunSection;
#[cfg(feature = "clap")]
use super::flags::parse_connections;
use super::flags::{SharedFlags, flag_err, parse_rate_range, set};
use super::section::{FieldError, Section, ServerPort, plural};
use super::{Kind, Way};
use crate::error::SpecError;
use crate::units::{ByteSize, Dur, Rate};
use serde::{Deserialize, Serialize};

/// HTTP protocol version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum HttpVersion {
    /// HTTP/1.1 (over TLS: ALPN offers http/1.1 only).
    #[default]
    Http1,
    /// HTTP/2: over TLS negotiated with ALPN, over plain TCP with prior knowledge (h2c).
    Http2,
}

impl HttpVersion {
    /// Its name in a result and in a profile (`http1`, `http2`).
    pub fn name(self) -> &'static str {
        match self {
            HttpVersion::Http1 => "http1",
            HttpVersion::Http2 => "http2",
        }
    }
}

/// One step of a rate schedule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateStep {
    /// Requests per second during the step.
    pub rate: Rate,
    /// How long the step lasts.
    pub duration: Dur,
}

/// Largest request body (`http.body`, or the file `http.body_file` names): 8 MiB. A fleet
/// carries the body in its orders, which travel in frames of at most 16 MiB.
pub const MAX_BODY: u64 = 8 << 20;

/// Reads a request body from the file at `path`, on the host the user runs netblast on: a
/// regular file of at most [`MAX_BODY`] bytes (a FIFO, a device such as /dev/zero, or a
/// directory is refused before it is opened, so nothing blocks or grows without bound).
pub fn read_body_file(path: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("http.body_file: cannot read {path}: {e}"))?;
    if !meta.is_file() {
        return Err(format!("http.body_file: {path} is not a regular file"));
    }
    if meta.len() > MAX_BODY {
        return Err(format!("http.body_file: {path} has {} bytes, over the {MAX_BODY}-byte limit", meta.len()));
    }
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(O_NONBLOCK)
        .open(path)
        .map_err(|e| format!("http.body_file: cannot read {path}: {e}"))?;
    let mut body = Vec::with_capacity(meta.len() as usize);
    f.take(MAX_BODY + 1).read_to_end(&mut body).map_err(|e| format!("http.body_file: cannot read {path}: {e}"))?;
    if body.len() as u64 > MAX_BODY {
        return Err(format!("http.body_file: {path} grew past the {MAX_BODY}-byte limit while it was read"));
    }
    Ok(body)
}

/// `O_NONBLOCK` (Linux): a file that turned into a FIFO between the check and the open does
/// not block.
const O_NONBLOCK: i32 = 0o4000;

/// The `[http]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSection {
    /// Where to send requests: absolute URLs, or paths (starting with `/`) on `--target`.
    /// Several are used round-robin, or by `weights`.
    #[serde(default = "default_urls", deserialize_with = "crate::bounded::urls")]
    pub urls: Vec<String>,
    /// Relative weights of `urls` (weighted round-robin); default equal.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "crate::bounded::weights")]
    pub weights: Option<Vec<u32>>,
    /// Paths are fetched over HTTPS from `--target` (absolute URLs carry their own scheme).
    #[serde(default)]
    pub tls: bool,
    /// Request method.
    #[serde(default = "default_method")]
    pub method: String,
    /// Extra request headers, `"Name: value"`.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::bounded::headers")]
    pub headers: Vec<String>,
    /// Request body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    /// Request body read from this file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_file: Option<String>,
    /// HTTP version.
    #[serde(default)]
    pub version: HttpVersion,
    /// TCP connections (`-c`), spread over the pinned workers.
    #[serde(default = "default_connections")]
    pub connections: u32,
    /// HTTP/2: requests in flight at once on each connection (h2load `-m`); each is a lane
    /// of its own, so `connections × streams` requests are outstanding. HTTP/1.1: 1.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub streams: u32,
    /// Reuse connections (default); off opens a connection (and TLS session) per request.
    #[serde(default = "yes")]
    pub keepalive: bool,
    /// Stop after this many requests in total (`-n`); the duration still caps the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    /// Open loop at a constant rate (requests/s over all workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Open loop ramp: from `rate` to `rate_to` over `ramp`, then hold `rate_to`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_to: Option<Rate>,
    /// Length of the ramp (default: the whole run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramp: Option<Dur>,
    /// Open loop in steps; the run lasts as long as the steps together.
    #[serde(default, skip_serializing_if = "Vec::is_empty", deserialize_with = "crate::bounded::steps")]
    pub steps: Vec<RateStep>,
    /// Per-request timeout (default 30 s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Accept any server certificate.
    #[serde(default)]
    pub insecure: bool,
    /// PEM file of CA certificates to trust (in addition to the system's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<String>,
    /// TLS server name to send and verify, when it differs from the URL's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
    /// Largest response body to read; longer bodies are read and counted, not kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_body: Option<ByteSize>,
    /// The status codes that count as succeeded: `2xx` (default), ranges and codes joined by
    /// commas (`200-399`, `2xx,304`). Others are completed responses, not successes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect_status: Option<String>,
}

/// The status codes a profile expects (`http.expect_status`), parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusSet(Vec<(u16, u16)>);

impl StatusSet {
    /// Parses `2xx`, `200-399`, `204` and lists of them joined by commas.
    pub fn parse(text: &str) -> Result<StatusSet, String> {
        let code = |t: &str| -> Result<u16, String> {
            t.trim()
                .parse::<u16>()
                .ok()
                .filter(|c| (100..=599).contains(c))
                .ok_or_else(|| format!("{t:?} is not a status code (100..599)"))
        };
        let mut out = Vec::new();
        for item in text.split(',').map(str::trim) {
            let range = if let Some(d) = item.strip_suffix("xx").filter(|d| d.len() == 1) {
                let c = code(&format!("{d}00"))?;
                (c, c + 99)
            } else if let Some((a, b)) = item.split_once('-') {
                let (a, b) = (code(a)?, code(b)?);
                if a > b {
                    return Err(format!("{item:?}: the range is empty"));
                }
                (a, b)
            } else {
                let c = code(item)?;
                (c, c)
            };
            out.push(range);
        }
        Ok(StatusSet(out))
    }

    /// Whether `status` is expected.
    pub fn contains(&self, status: u16) -> bool {
        self.0.iter().any(|(a, b)| (*a..=*b).contains(&status))
    }
}

impl std::fmt::Display for StatusSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let items: Vec<String> = self
            .0
            .iter()
            .map(|&(a, b)| match (a, b) {
                (a, b) if a == b => a.to_string(),
                (a, b) if a % 100 == 0 && b == a + 99 => format!("{}xx", a / 100),
                (a, b) => format!("{a}-{b}"),
            })
            .collect();
        f.write_str(&items.join(","))
    }
}

fn default_urls() -> Vec<String> {
    vec!["/".to_string()]
}

fn default_method() -> String {
    "GET".to_string()
}

fn default_connections() -> u32 {
    HttpSection::DEFAULT_CONNECTIONS
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

impl Default for HttpSection {
    fn default() -> Self {
        HttpSection {
            urls: default_urls(),
            weights: None,
            tls: false,
            method: default_method(),
            headers: Vec::new(),
            body: None,
            body_file: None,
            version: HttpVersion::Http1,
            connections: HttpSection::DEFAULT_CONNECTIONS,
            streams: 1,
            keepalive: true,
            requests: None,
            rate: None,
            rate_to: None,
            ramp: None,
            steps: Vec::new(),
            timeout: None,
            insecure: false,
            cacert: None,
            sni: None,
            max_body: None,
            expect_status: None,
        }
    }
}

impl HttpSection {
    /// Default connection count.
    pub const DEFAULT_CONNECTIONS: u32 = 10;
    /// Default per-request timeout.
    pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

    /// The status codes that count as succeeded (default 2xx).
    pub fn expected(&self) -> StatusSet {
        self.expect_status.as_deref().and_then(|t| StatusSet::parse(t).ok()).unwrap_or(StatusSet(vec![(200, 299)]))
    }

    /// The per-request timeout in effect.
    pub fn timeout(&self) -> std::time::Duration {
        self.timeout.map(Dur::get).unwrap_or(Self::DEFAULT_TIMEOUT)
    }

    /// Whether requests follow a schedule (open loop) rather than responses (closed loop).
    pub fn open_loop(&self) -> bool {
        self.rate.is_some() || !self.steps.is_empty()
    }

    /// Total length of `steps`.
    pub fn steps_duration(&self) -> std::time::Duration {
        self.steps.iter().map(|s| s.duration.get()).sum()
    }

    /// Replaces `body_file` by its content in `body`, for a profile that travels to agents: an
    /// order carries its body as data, and agents open no path a peer names. The file must be
    /// UTF-8 text (a body in a profile is a string).
    pub fn inline_body_file(&mut self) -> Result<(), String> {
        let Some(path) = self.body_file.take() else { return Ok(()) };
        let bytes = read_body_file(&path)?;
        let text = String::from_utf8(bytes).map_err(|_| {
            format!("http.body_file: {path} is not UTF-8 text; a fleet carries the body in its orders as text")
        })?;
        self.body = Some(text);
        Ok(())
    }

    /// Checks the section's fields ([`Section::check`]); errors are (field, message).
    fn check_fields(&self) -> Result<(), FieldError> {
        if self.urls.is_empty() {
            return Err(("http.urls", "names no URL".into()));
        }
        for u in &self.urls {
            if !(u.starts_with('/') || u.starts_with("http://") || u.starts_with("https://")) {
                return Err(("http.urls", format!("{u:?} is neither a path (/...) nor an http:// or https:// URL")));
            }
        }
        if let Some(w) = &self.weights {
            if w.len() != self.urls.len() {
                return Err(("http.weights", format!("{} weights for {} URLs", w.len(), self.urls.len())));
            }
            if w.iter().all(|x| *x == 0) {
                return Err(("http.weights", "all weights are 0".into()));
            }
        }
        if self.method.is_empty() || !self.method.bytes().all(|b| b.is_ascii_uppercase()) {
            return Err(("http.method", format!("{:?} is not a method (GET, POST, ...)", self.method)));
        }
        for h in &self.headers {
            match h.split_once(':') {
                Some((name, _)) if !name.trim().is_empty() && !name.contains(' ') => {}
                _ => return Err(("http.headers", format!("{h:?} is not \"Name: value\""))),
            }
        }
        if self.body.is_some() && self.body_file.is_some() {
            return Err(("http.body", "set body or body_file, not both".into()));
        }
        if let Some(b) = &self.body {
            if b.len() as u64 > MAX_BODY {
                return Err(("http.body", format!("{} bytes is over the {MAX_BODY}-byte limit", b.len())));
            }
        }
        if self.connections == 0 || self.connections > 100_000 {
            return Err(("http.connections", format!("{} is outside 1..100000", self.connections)));
        }
        if self.streams == 0 || self.streams > 1000 {
            return Err(("http.streams", format!("{} is outside 1..1000", self.streams)));
        }
        if self.streams > 1 && self.version != HttpVersion::Http2 {
            return Err(("http.streams", "several streams per connection need HTTP/2 (--http2)".into()));
        }
        if self.streams > 1 && !self.keepalive {
            return Err(("http.streams", "several streams share a connection: not with keepalive off".into()));
        }
        if let Some(t) = &self.expect_status {
            StatusSet::parse(t).map_err(|e| ("http.expect_status", e))?;
        }
        if self.requests == Some(0) {
            return Err(("http.requests", "must be greater than 0".into()));
        }
        if !self.steps.is_empty() && (self.rate.is_some() || self.rate_to.is_some()) {
            return Err(("http.steps", "use steps or rate (and rate_to), not both".into()));
        }
        if self.rate_to.is_some() && self.rate.is_none() {
            return Err(("http.rate_to", "a ramp needs a starting rate (http.rate)".into()));
        }
        if self.ramp.is_some() && self.rate_to.is_none() {
            return Err(("http.ramp", "a ramp needs http.rate_to".into()));
        }
        if self.steps.iter().any(|s| s.duration.get().is_zero()) {
            return Err(("http.steps", "every step needs a duration > 0".into()));
        }
        if self.timeout.is_some_and(|t| t.get().is_zero()) {
            return Err(("http.timeout", "must be greater than 0".into()));
        }
        Ok(())
    }
}

/// What is true of every http test: it counts responses, takes no `--omit`, and a fleet ranks it
/// by responses per second.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "responses", takes_omit: false, headline: super::Headline::Responses };

impl Section for HttpSection {
    fn expected_statuses(&self) -> Option<StatusSet> {
        Some(self.expected())
    }

    fn rate_steps(&self) -> &[RateStep] {
        &self.steps
    }

    fn version_name(&self) -> Option<String> {
        Some(self.version.name().to_string())
    }

    fn open_loop_rate(&self) -> Option<f64> {
        self.rate.map(|r| r.per_second())
    }

    fn aimed_at(&self, target: &str) -> Option<String> {
        let scheme = if self.tls { "https" } else { "http" };
        let urls: Vec<String> = self
            .urls
            .iter()
            .map(|u| if u.starts_with('/') { format!("{scheme}://{target}{u}") } else { u.clone() })
            .collect();
        Some(urls.join(", "))
    }

    fn connections_not_streams(&self) -> Option<u32> {
        Some(self.connections)
    }

    fn kind(&self) -> Kind {
        Kind::Http
    }

    fn aims_at_urls(&self) -> bool {
        true
    }

    fn server_port(&self) -> ServerPort {
        if self.tls { ServerPort::Https } else { ServerPort::Http }
    }

    fn host_path(&self) -> Option<(&'static str, &'static str)> {
        self.body_file.is_some().then_some(("http.body_file", "an order carries its body in http.body"))
    }

    fn inline_host_files(&mut self) -> Result<(), String> {
        self.inline_body_file()
    }

    fn target_port(&self, _data_port: u16) -> u16 {
        if self.tls { 443 } else { 80 }
    }

    fn errors_name(&self) -> &'static str {
        "run errors (failed requests are counted apart)"
    }

    fn dial_targets(&self, target: &str, _data_port: u16) -> Vec<(String, u16)> {
        let default = if self.tls { 443 } else { 80 };
        self.urls
            .iter()
            .map(|u| {
                if u.starts_with('/') {
                    return (target.to_string(), default);
                }
                let rest = u.split_once("://").map(|(_, r)| r).unwrap_or(u);
                let authority = rest.split(['/', '?']).next().unwrap_or("");
                (authority.to_string(), if u.starts_with("https://") { 443 } else { 80 })
            })
            .collect()
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--rate", "--timeout", "-n", "--tls", "--insecure", "--cacert", "--sni"]
    }

    fn describe(&self, bound: &str) -> String {
        let mode = match (self.rate, self.rate_to, self.steps.is_empty()) {
            (Some(a), Some(b), _) => format!("open loop {a} to {b}"),
            (Some(a), None, _) => format!("open loop at {a}"),
            (None, _, false) => {
                let d = self.steps[0].duration;
                let each =
                    if self.steps.iter().all(|s| s.duration == d) { format!(" of {d} each") } else { String::new() };
                format!("open loop in {} steps{each}", self.steps.len())
            }
            (None, _, true) => "closed loop".to_string(),
        };
        let n = self.requests.map(|n| format!(", {n} requests")).unwrap_or_default();
        format!(
            "http: {} {}, {} connection{}, {mode}{n}, {bound}",
            self.method,
            self.urls.join(" "),
            self.connections,
            plural(self.connections)
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        self.check_fields()
    }

    fn count_bound(&self) -> bool {
        self.requests.is_some() || !self.steps.is_empty()
    }

    fn bound_hint(&self) -> String {
        "set run.duration, http.requests or http.steps".to_string()
    }

    fn own_duration(&self) -> Option<std::time::Duration> {
        (!self.steps.is_empty()).then(|| self.steps_duration())
    }

    fn ways(&self) -> &'static [Way] {
        &[]
    }

    fn stream_count(&self, _cpus: usize) -> usize {
        0
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        Some(&mut self.connections)
    }

    fn share_totals(&mut self, f: f64, part_of: &dyn Fn(u64) -> u64) {
        for r in [self.rate.as_mut(), self.rate_to.as_mut()].into_iter().flatten() {
            r.0 *= f;
        }
        for step in &mut self.steps {
            step.rate.0 *= f;
        }
        if let Some(n) = self.requests.as_mut() {
            *n = part_of(*n);
        }
    }

    fn latency_name(&self) -> &'static str {
        "request latency"
    }
}

/// http's own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct HttpFlags {
    /// http: URL to request (repeat for several, used round-robin); paths go to --target.
    #[cfg_attr(feature = "clap", arg(long = "url", value_name = "URL"))]
    pub urls: Vec<String>,
    /// http: request method.
    #[cfg_attr(feature = "clap", arg(long, short = 'X'))]
    pub method: Option<String>,
    /// http: extra request header "Name: value" (repeatable).
    #[cfg_attr(feature = "clap", arg(long = "header", short = 'H', value_name = "NAME: VALUE"))]
    pub headers: Vec<String>,
    /// http: request body.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "body_file"))]
    pub body: Option<String>,
    /// http: request body from a file.
    #[cfg_attr(feature = "clap", arg(long))]
    pub body_file: Option<String>,
    /// http: use HTTP/1.1.
    #[cfg_attr(feature = "clap", arg(long, conflicts_with = "http2"))]
    pub http1: bool,
    /// http: use HTTP/2 (h2 over TLS by ALPN, h2c with prior knowledge over plain TCP).
    #[cfg_attr(feature = "clap", arg(long))]
    pub http2: bool,
    /// http: connections (`-c` as wrk and h2load take it; iperf3's `-c HOST` is `run HOST`).
    #[cfg_attr(feature = "clap", arg(long, short = 'c', value_parser = parse_connections))]
    pub connections: Option<u32>,
    /// http: HTTP/2 requests in flight at once per connection (as h2load -m; default 1).
    #[cfg_attr(feature = "clap", arg(long, short = 'm'))]
    pub streams: Option<u32>,
    /// http: open a new connection (and TLS handshake) for every request.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_keepalive: bool,
    /// http: the status codes that count as succeeded (default 2xx; e.g. 200-399, 2xx,304).
    #[cfg_attr(feature = "clap", arg(long, value_name = "CODES"))]
    pub expect_status: Option<String>,
    /// http: stop after this many requests in total (-n as hey takes it).
    #[cfg_attr(feature = "clap", arg(long))]
    pub requests: Option<u64>,
    /// http: length of the --rate ramp (default: the whole run).
    #[cfg_attr(feature = "clap", arg(long))]
    pub ramp: Option<Dur>,
}

impl HttpFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [
            ("--url", !self.urls.is_empty()),
            ("--method", self.method.is_some()),
            ("--header", !self.headers.is_empty()),
            ("--body", self.body.is_some()),
            ("--body-file", self.body_file.is_some()),
            ("--http1/--http2", self.http1 || self.http2),
            ("--connections", self.connections.is_some()),
            ("--streams", self.streams.is_some()),
            ("--no-keepalive", self.no_keepalive),
            ("--expect-status", self.expect_status.is_some()),
            ("--requests", self.requests.is_some()),
            ("--ramp", self.ramp.is_some()),
        ];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl HttpSection {
    /// Applies the http flags (`--requests` makes the request count the bound, as hey -n).
    pub fn apply(&mut self, own: &HttpFlags, shared: &SharedFlags, run: &mut RunSection) -> Result<(), SpecError> {
        if !own.urls.is_empty() {
            self.urls = own.urls.clone();
            self.weights = None;
        }
        if let Some(m) = &own.method {
            self.method = m.to_ascii_uppercase();
        }
        self.headers.extend(own.headers.iter().cloned());
        if own.body.is_some() {
            self.body = own.body.clone();
            self.body_file = None;
        }
        if own.body_file.is_some() {
            self.body_file = own.body_file.clone();
            self.body = None;
        }
        if own.http1 {
            self.version = HttpVersion::Http1;
        } else if own.http2 {
            self.version = HttpVersion::Http2;
        }
        self.tls |= shared.tls;
        self.insecure |= shared.insecure;
        if shared.cacert.is_some() {
            self.cacert = shared.cacert.clone();
        }
        if shared.sni.is_some() {
            self.sni = shared.sni.clone();
        }
        set(&mut self.connections, own.connections);
        set(&mut self.streams, own.streams);
        if own.no_keepalive {
            self.keepalive = false;
        }
        if own.expect_status.is_some() {
            self.expect_status = own.expect_status.clone();
        }
        let count = match &shared.count {
            Some(c) => Some(c.trim().parse::<u64>().ok().filter(|&n| n > 0).ok_or_else(|| {
                flag_err("-n", format!("{c:?}: an http test's -n is a request count (hey -n 10000), a whole number"))
            })?),
            None => None,
        };
        if let Some(n) = own.requests.or(count) {
            self.requests = Some(n);
            if shared.duration.is_none() {
                // As hey -n: the request count is the bound; the time cap still applies.
                run.duration = None;
            }
        }
        if let (Some(d), false, None) = (shared.duration, self.steps.is_empty(), &shared.rate) {
            // A sweep's length is its steps': -t is each step's length (said in the
            // description: "N steps of D each"), never a cut after the first steps.
            for step in &mut self.steps {
                step.duration = d;
            }
            run.duration = None;
        }
        if let Some(r) = &shared.rate {
            let (from, to) = parse_rate_range(r).map_err(|e| flag_err("--rate", e))?;
            self.steps.clear();
            self.rate = Some(from);
            self.rate_to = to;
        }
        if own.ramp.is_some() {
            self.ramp = own.ramp;
        }
        if shared.timeout.is_some() {
            self.timeout = shared.timeout;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_file_is_a_regular_file_within_the_cap_and_nothing_else_is_opened() {
        // Found in the audit: /dev/zero grew an agent to 2 GB in 3.5 s; a FIFO blocked forever.
        let e = read_body_file("/dev/zero").unwrap_err();
        assert!(e.contains("http.body_file") && e.contains("not a regular file"), "{e}");
        let dir = std::env::temp_dir().join(format!("nb-body-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid C string; mkfifo only creates the node.
        assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = read_body_file(fifo.to_str().unwrap()).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        let big = dir.join("big");
        std::fs::File::create(&big).unwrap().set_len(MAX_BODY + 1).unwrap();
        let e = read_body_file(big.to_str().unwrap()).unwrap_err();
        assert!(e.contains("over the") && e.contains(&MAX_BODY.to_string()), "{e}");
        let ok = dir.join("ok");
        std::fs::write(&ok, b"a=1").unwrap();
        assert_eq!(read_body_file(ok.to_str().unwrap()).unwrap(), b"a=1");
        let mut h = HttpSection { body_file: Some(ok.to_str().unwrap().into()), ..Default::default() };
        h.inline_body_file().unwrap();
        assert_eq!((h.body.as_deref(), h.body_file.as_deref()), (Some("a=1"), None));
        let _ = std::fs::remove_dir_all(&dir);
    }

    unsafe extern "C" {
        #[link_name = "mkfifo"]
        fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
    }
}
