//! `[cps]`: connections per second (netperf `TCP_CRR`, `ethr -t c`): open a TCP connection,
//! optionally exchange a request and a response, close it, and again, one flow per pinned CPU.
//! What firewall, SNAT and load-balancer tests measure.

use super::RunSection;
use super::flags::{SharedFlags, one_rate, set, set_some};
use super::section::{FieldError, Section, check_flows, flows_words};
use super::{Kind, Way};
use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The local ports one source address has for one destination by default
/// (`net.ipv4.ip_local_port_range` 32768-60999).
pub const DEFAULT_PORTS: f64 = 28_232.0;

/// How each connection ends, and so which end keeps its TIME_WAIT.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum CloseMode {
    /// An orderly close (FIN): the client's end waits in TIME_WAIT for 60 s, holding its port,
    /// as real clients do; ports run out at about 28 000 / 60 s per destination unless the
    /// kernel reuses them (`net.ipv4.tcp_tw_reuse`).
    #[default]
    Fin,
    /// An abortive close (RST, `SO_LINGER` 0), as `ethr` does: no TIME_WAIT, so no port
    /// exhaustion; the server sees a reset, not a FIN.
    Rst,
    /// The server closes first, right after its response, as netperf `TCP_CRR`'s server and
    /// HTTP/1.0 servers do; the client reads the end of the stream, then closes. The TIME_WAIT
    /// is the server's, so the client's ports do not run out.
    Server,
}

impl CloseMode {
    /// The name as written in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            CloseMode::Fin => "fin",
            CloseMode::Rst => "rst",
            CloseMode::Server => "server",
        }
    }
}

/// What a client with no agent on the other side reads of each connection before it closes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum ReadMode {
    /// Nothing: connect (and shake hands), send what `send` holds, close.
    None,
    /// The server's first bytes (a banner, the start of a response), or its close.
    First,
    /// Everything until the server closes (an HTTP/1.0 response).
    All,
}

impl ReadMode {
    /// The name as written in profiles and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            ReadMode::None => "none",
            ReadMode::First => "first",
            ReadMode::All => "all",
        }
    }
}

/// A TLS protocol version to hold the handshake to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum TlsVersion {
    /// TLS 1.2.
    #[serde(rename = "1.2")]
    #[cfg_attr(feature = "clap", value(name = "1.2"))]
    Tls12,
    /// TLS 1.3.
    #[serde(rename = "1.3")]
    #[cfg_attr(feature = "clap", value(name = "1.3"))]
    Tls13,
}

impl TlsVersion {
    /// "TLS 1.2", "TLS 1.3".
    pub fn name(self) -> &'static str {
        match self {
            TlsVersion::Tls12 => "TLS 1.2",
            TlsVersion::Tls13 => "TLS 1.3",
        }
    }
}

/// The `[cps]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CpsSection {
    /// Flows, each opening one connection at a time; default one per selected client CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub flows: Option<u32>,
    /// Bytes the client sends on each connection before waiting for the response (0: none;
    /// default 1, as netperf TCP_CRR).
    #[serde(default = "one_byte")]
    pub req_bytes: ByteSize,
    /// Bytes the server answers each request with (0: none; default 1).
    #[serde(default = "one_byte")]
    pub resp_bytes: ByteSize,
    /// New connections per second in all, spread evenly over the flows; none: as fast as each
    /// flow can. A flow that falls behind opens its next connection at once (paced, closed
    /// loop: a slow connection delays the ones after it on its flow).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// `fin` (default: the client closes first), `rst` or `server` (the server closes first).
    #[serde(default, skip_serializing_if = "is_fin")]
    pub close: CloseMode,
    /// A connection not established, or not answered, within this long fails as timed out
    /// (default 3 s: one SYN retransmission, at 1 s, still succeeds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<Dur>,
    /// Server CPUs for the flows' listeners, flow i on the i-th (wrapping); default: the
    /// client's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<CpuList>,
    /// A `netblast serve` on the other side (default). `false`: any TCP listener (a web
    /// server, a load balancer's address, a firewall in front of a server): the client counts
    /// alone, and sends `send` and reads `read` instead of `req_bytes` and `resp_bytes`.
    #[serde(default = "yes", skip_serializing_if = "is_yes")]
    pub agent: bool,
    /// With no agent: what the client sends on each connection once it is up (and its TLS
    /// handshake done), e.g. `"GET / HTTP/1.0\r\n\r\n"` (`\r`, `\n`, `\t`, `\\` and
    /// `\xNN` read as escapes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send: Option<String>,
    /// With no agent: what the client reads before it closes; default `all` with `close =
    /// "server"`, `first` when it sends something, else `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read: Option<ReadMode>,
    /// With no agent: a TLS handshake on every connection, timed from `connect` to its end.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tls: bool,
    /// TLS: hold the handshake to this version (default: the highest both ends take).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_version: Option<TlsVersion>,
    /// TLS: resume sessions (tickets, or session ids in TLS 1.2): the first handshake is full,
    /// the ones after it resumed when the server agrees. Default: every handshake full.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub resume: bool,
    /// TLS: accept any server certificate.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure: bool,
    /// TLS: a PEM file of CA certificates to trust beside the system's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cacert: Option<String>,
    /// TLS: the server name to send and verify (default: the target's host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<String>,
}

fn yes() -> bool {
    true
}

fn is_yes(b: &bool) -> bool {
    *b
}

fn one_byte() -> ByteSize {
    ByteSize(1)
}

fn is_fin(c: &CloseMode) -> bool {
    *c == CloseMode::Fin
}

impl CpsSection {
    /// Default connection timeout.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(3);
    /// Longest timeout a profile may set.
    pub const MAX_TIMEOUT: Duration = Duration::from_secs(60);
    /// Largest request or response.
    pub const MAX_MSG: u64 = 1 << 24;

    /// The connection timeout in effect.
    pub fn timeout(&self) -> Duration {
        self.timeout.map(Dur::get).unwrap_or(Self::DEFAULT_TIMEOUT)
    }

    /// With no agent: what the client reads of each connection (see [`CpsSection::read`]).
    pub fn read_mode(&self) -> ReadMode {
        match (self.read, self.close, &self.send) {
            (Some(r), _, _) => r,
            (None, CloseMode::Server, _) => ReadMode::All,
            (None, _, Some(_)) => ReadMode::First,
            (None, _, None) => ReadMode::None,
        }
    }

    /// With no agent: the bytes sent on each connection, escapes read.
    pub fn send_bytes(&self) -> Result<Vec<u8>, String> {
        self.send.as_deref().map(unescape).transpose().map(Option::unwrap_or_default)
    }
}

/// Reads `\r`, `\n`, `\t`, `\\`, `\0` and `\xNN` in `s`; any other backslash is an error.
pub fn unescape(s: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        match chars.next() {
            Some('r') => out.push(b'\r'),
            Some('n') => out.push(b'\n'),
            Some('t') => out.push(b'\t'),
            Some('0') => out.push(0),
            Some('\\') => out.push(b'\\'),
            Some('x') => {
                let hex: String = chars.by_ref().take(2).collect();
                let b = u8::from_str_radix(&hex, 16).map_err(|_| format!("\\x{hex} is not two hex digits"))?;
                out.push(b);
            }
            Some(o) => return Err(format!("\\{o} is not an escape this reads (\\r \\n \\t \\0 \\\\ \\xNN)")),
            None => return Err("a lone \\ at the end".into()),
        }
    }
    Ok(out)
}

impl Default for CpsSection {
    fn default() -> Self {
        CpsSection {
            flows: None,
            req_bytes: one_byte(),
            resp_bytes: one_byte(),
            rate: None,
            close: CloseMode::Fin,
            timeout: None,
            server_cpus: None,
            agent: true,
            send: None,
            read: None,
            tls: false,
            tls_version: None,
            resume: false,
            insecure: false,
            cacert: None,
            sni: None,
        }
    }
}

/// What is true of every cps test: it counts connections, takes no `--omit`, and a fleet ranks
/// it by connections per second.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "connections", takes_omit: false, headline: super::Headline::OpsSent };

impl Section for CpsSection {
    fn open_loop_rate(&self) -> Option<f64> {
        self.rate.map(|r| r.per_second())
    }

    fn kind(&self) -> Kind {
        Kind::Cps
    }

    fn target_port(&self, data_port: u16) -> u16 {
        // Any listener: the web ports by default.
        match (self.agent, self.tls) {
            (true, _) => data_port,
            (false, true) => 443,
            (false, false) => 80,
        }
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &[
            "--flows",
            "--req-size",
            "--resp-size",
            "--server-cpus",
            "--rate",
            "--timeout",
            "--tls",
            "--insecure",
            "--cacert",
            "--sni",
        ]
    }

    fn describe(&self, bound: &str) -> String {
        if !self.agent {
            return self.describe_agentless(bound);
        }
        format!(
            "cps: TCP connections{}, {}-byte request and {}-byte response on each, close with {}, {}, {bound}",
            self.rate.map(|r| format!(" at {} in all", crate::units::fmt_per_s(r.per_second()))).unwrap_or_default(),
            self.req_bytes.bytes(),
            self.resp_bytes.bytes(),
            self.close.name().to_uppercase(),
            flows_words(self.flows),
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("cps.flows", self.flows)?;
        self.check_agentless()?;
        for (field, v) in [("cps.req_bytes", self.req_bytes), ("cps.resp_bytes", self.resp_bytes)] {
            if v.bytes() > CpsSection::MAX_MSG {
                return Err((field, format!("{} is outside 0..{} bytes", v.bytes(), CpsSection::MAX_MSG)));
            }
        }
        if let Some(r) = self.rate {
            if !(r.per_second() >= 1.0 && r.per_second() <= 1e8) {
                return Err(("cps.rate", format!("{} connections/s is outside 1..100M", r.per_second())));
            }
        }
        if let Some(t) = self.timeout {
            if t.get() < Duration::from_millis(1) || t.get() > CpsSection::MAX_TIMEOUT {
                return Err(("cps.timeout", format!("{t} is outside 1ms..60s")));
            }
        }
        Ok(())
    }

    fn ways(&self) -> &'static [Way] {
        &[Way::Up]
    }

    fn stream_count(&self, cpus: usize) -> usize {
        self.flows.map(|f| f as usize).unwrap_or(cpus.max(1))
    }

    fn flows_per_cpu(&self) -> bool {
        self.flows.is_none()
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        self.flows.as_mut()
    }

    fn share_totals(&mut self, f: f64, _part_of: &dyn Fn(u64) -> u64) {
        if let Some(r) = self.rate.as_mut() {
            r.0 *= f;
        }
    }

    fn server_cpus(&self) -> Option<&CpuList> {
        self.server_cpus.as_ref()
    }

    fn counts_msgs(&self) -> bool {
        true
    }

    fn nodelay_default(&self) -> bool {
        true
    }

    fn latency_name(&self) -> &'static str {
        if self.tls { "handshake latency" } else { "connect latency" }
    }

    fn pins_server(&self) -> bool {
        self.agent
    }

    fn lost_name(&self) -> &'static str {
        "connections failed"
    }

    fn own_listener(&self) -> bool {
        true
    }

    fn sender_counts_lost(&self) -> bool {
        true
    }

    fn sent_counts_lost(&self) -> bool {
        false
    }

    fn headline_bits(&self) -> bool {
        false
    }
}

/// cps' own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct CpsFlags {
    /// cps: how each connection ends: fin (the client closes first; its port waits in
    /// TIME_WAIT), rst (SO_LINGER 0, as ethr: no TIME_WAIT, no port exhaustion) or server (the
    /// server closes first, as netperf TCP_CRR: the TIME_WAIT is the server's).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub close: Option<CloseMode>,
    /// cps: any TCP listener on the other side, no `netblast serve` (a web server, a load
    /// balancer's address): the client counts alone. The cps profile's close = server becomes
    /// fin unless --send asks the server for an answer.
    #[cfg_attr(feature = "clap", arg(long))]
    pub no_agent: bool,
    /// cps with --no-agent: what to send on each connection once it is up, escapes read
    /// (e.g. 'GET / HTTP/1.0\r\n\r\n').
    #[cfg_attr(feature = "clap", arg(long, value_name = "TEXT"))]
    pub send: Option<String>,
    /// cps with --no-agent: what to read before closing: none, first (the first bytes: a
    /// banner, a response's start) or all (until the server closes).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub read: Option<ReadMode>,
    /// cps with --no-agent --tls: hold the handshake to TLS 1.2 or 1.3.
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub tls_version: Option<TlsVersion>,
    /// cps with --no-agent --tls: resume TLS sessions (the first handshake full, the rest
    /// resumed when the server agrees); default: every handshake full.
    #[cfg_attr(feature = "clap", arg(long))]
    pub resume: bool,
}

impl CpsFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [
            ("--close", self.close.is_some()),
            ("--no-agent", self.no_agent),
            ("--send", self.send.is_some()),
            ("--read", self.read.is_some()),
            ("--tls-version", self.tls_version.is_some()),
            ("--resume", self.resume),
        ];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl CpsSection {
    /// Applies the cps flags (one rate: a ramp is refused).
    pub fn apply(&mut self, own: &CpsFlags, shared: &SharedFlags, _run: &mut RunSection) -> Result<(), SpecError> {
        if shared.flows.is_some() {
            self.flows = shared.flows;
        }
        set(&mut self.req_bytes, shared.req_size);
        set(&mut self.resp_bytes, shared.resp_size);
        if let Some(r) = &shared.rate {
            self.rate = Some(one_rate(r, "a cps test runs")?);
        }
        if shared.timeout.is_some() {
            self.timeout = shared.timeout;
        }
        set(&mut self.close, own.close);
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        if own.no_agent {
            self.agent = false;
        }
        if own.send.is_some() {
            self.send = own.send.clone();
        }
        if own.read.is_some() {
            self.read = own.read;
        }
        if own.no_agent && own.close.is_none() && self.close == CloseMode::Server && self.send.is_none() {
            // With nothing asked, a server closes first only at its own idle timeout.
            self.close = CloseMode::Fin;
        }
        self.tls |= shared.tls;
        self.insecure |= shared.insecure;
        self.resume |= own.resume;
        set_some(&mut self.tls_version, own.tls_version);
        set_some(&mut self.cacert, shared.cacert.clone());
        set_some(&mut self.sni, shared.sni.clone());
        Ok(())
    }
}

impl CpsSection {
    /// The description of a test with no agent on the other side.
    fn describe_agentless(&self, bound: &str) -> String {
        let tls = if self.tls {
            format!(
                ", a {}{} TLS handshake",
                if self.resume { "resumed (after the first)" } else { "full" },
                self.tls_version.map(|v| format!(" {}", v.name())).unwrap_or_default()
            )
        } else {
            String::new()
        };
        let send = match &self.send {
            Some(text) => format!(", sends {text:?}"),
            None => String::new(),
        };
        let read = match self.read_mode() {
            ReadMode::None => "reads nothing",
            ReadMode::First => "reads the server's first bytes",
            ReadMode::All => "reads until the server closes",
        };
        format!(
            "cps with no agent: TCP connections{} to any listener{tls}{send}, {read}, close with {}, {}, {bound}",
            self.rate.map(|r| format!(" at {} in all", crate::units::fmt_per_s(r.per_second()))).unwrap_or_default(),
            if self.close == CloseMode::Server {
                "the server's close".to_string()
            } else {
                self.close.name().to_uppercase()
            },
            flows_words(self.flows),
        )
    }

    /// The fields that only a test with no agent takes, and theirs checked.
    fn check_agentless(&self) -> Result<(), FieldError> {
        let only_agentless = [
            ("cps.send", self.send.is_some()),
            ("cps.read", self.read.is_some()),
            ("cps.tls", self.tls),
            ("cps.tls_version", self.tls_version.is_some()),
            ("cps.resume", self.resume),
            ("cps.insecure", self.insecure),
            ("cps.cacert", self.cacert.is_some()),
            ("cps.sni", self.sni.is_some()),
        ];
        if self.agent {
            if let Some((field, _)) = only_agentless.iter().find(|(_, on)| *on) {
                return Err((
                    field,
                    "is for a server with no agent (agent = false, --no-agent); a netblast server's cps listener \
                     takes req_bytes and resp_bytes"
                        .into(),
                ));
            }
            return Ok(());
        }
        if !self.tls {
            // The settings after `cps.tls` in the list are TLS's own.
            if let Some((field, _)) = only_agentless[3..].iter().find(|(_, on)| *on) {
                return Err((field, "is a TLS setting: add tls = true (--tls)".into()));
            }
        }
        let bytes = self.send_bytes().map_err(|e| ("cps.send", e))?;
        if bytes.len() as u64 > Self::MAX_MSG {
            return Err(("cps.send", format!("{} bytes is over {} bytes", bytes.len(), Self::MAX_MSG)));
        }
        if self.server_cpus.is_some() {
            return Err(("cps.server_cpus", "pins a netblast server's flows; with no agent there is none".into()));
        }
        if self.close == CloseMode::Server && self.read_mode() != ReadMode::All {
            return Err(("cps.read", "close = \"server\" reads until the server closes: read = \"all\"".into()));
        }
        Ok(())
    }
}
