//! Overrides: what command-line flags change in a loaded profile, as plain data, applied before
//! validation. The binary fills an [`Overrides`] from its flags; a coordinator can send one.
//!
//! A flag that does not apply to the profile's kind is an error naming the flag. Once anything
//! is overridden, the profile's description is rewritten from the resulting workload, so a
//! result never says "One TCP flow for 10 s" of a run with 64 flows for 3 s.

use super::{CloseMode, Direction, HttpVersion, Kind, Profile, Protocol, SendMode, WaitMode, Workload};
use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};

/// Flag values that replace profile fields; `None`/`false`/empty leaves the field alone.
///
/// These are the command line's profile flags themselves (with the `clap` feature, `netblast
/// run` and `netblast fleet` flatten this struct): a setting is defined here once, with its
/// help, and in its profile section.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Overrides {
    /// Parallel flows, as iperf3 -P (bulk: per direction; msgrate and rr: one per pinned CPU).
    #[cfg_attr(feature = "clap", arg(long, short = 'P', visible_alias = "parallel"))]
    pub flows: Option<u32>,
    /// Test length, e.g. 10s, 1m.
    #[cfg_attr(feature = "clap", arg(long, short = 't'))]
    pub duration: Option<Dur>,
    /// Stop after this many bytes in total (e.g. 10GiB); the duration still caps the run.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bytes: Option<ByteSize>,
    /// Run this long first and leave it out of the totals, e.g. 2s (iperf3 -O: skip slow
    /// start); bulk; the test lasts -t more.
    #[cfg_attr(feature = "clap", arg(long, short = 'O'))]
    pub omit: Option<Dur>,
    /// Reporting interval.
    #[cfg_attr(feature = "clap", arg(long, short = 'i'))]
    pub interval: Option<Dur>,
    /// Server sends, client receives.
    #[cfg_attr(feature = "clap", arg(long, short = 'R', conflicts_with = "bidir"))]
    pub reverse: bool,
    /// Both directions at once, on separate connections.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bidir: bool,
    /// Client CPUs for the pinned workers, e.g. 0-3,6 (default: all usable CPUs).
    #[cfg_attr(feature = "clap", arg(long))]
    pub cpus: Option<CpuList>,
    /// Socket buffer size for both SO_SNDBUF and SO_RCVBUF (iperf3 -w).
    #[cfg_attr(feature = "clap", arg(long, short = 'w'))]
    pub window: Option<ByteSize>,
    /// SO_SNDBUF.
    #[cfg_attr(feature = "clap", arg(long))]
    pub sndbuf: Option<ByteSize>,
    /// SO_RCVBUF.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rcvbuf: Option<ByteSize>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[cfg_attr(feature = "clap", arg(long, short = 'M'))]
    pub mss: Option<u32>,
    /// TCP congestion control algorithm, e.g. cubic, bbr.
    #[cfg_attr(feature = "clap", arg(long, short = 'C'))]
    pub congestion: Option<String>,
    /// Set TCP_NODELAY (disable Nagle).
    #[cfg_attr(feature = "clap", arg(long, short = 'N'))]
    pub nodelay: bool,
    /// Bytes per send call (iperf3 -l); msgrate: bytes per message or datagram.
    #[cfg_attr(feature = "clap", arg(long, short = 'l'))]
    pub block: Option<ByteSize>,
    /// Send without copying from user space: sendfile (default) or msg (MSG_ZEROCOPY).
    #[cfg_attr(feature = "clap", arg(long = "zerocopy", short = 'Z', num_args = 0..=1, default_missing_value = "sendfile", value_enum))]
    pub send_mode: Option<SendMode>,
    /// msgrate: bytes per message (default 1).
    #[cfg_attr(feature = "clap", arg(long))]
    pub msg_size: Option<ByteSize>,
    /// msgrate: messages per sendmmsg call (1: one send per message).
    #[cfg_attr(feature = "clap", arg(long))]
    pub batch: Option<u32>,
    /// msgrate over TCP: every message its own segment (MSG_EOR: the kernel never joins two);
    /// --eor false lets the kernel join them (pps-8core sets it).
    #[cfg_attr(feature = "clap", arg(long, num_args = 0..=1, default_missing_value = "true", value_name = "BOOL"))]
    pub eor: Option<bool>,
    /// msgrate over TCP: how receivers read: batch (what has arrived, up to 256 KiB) or each
    /// (one message per call, as qperf's receiver: the work qperf -m 1 tcp_bw measures).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub recv: Option<super::RecvMode>,
    /// msgrate over UDP: the server's receivers: flow (a socket per flow) or per-cpu (one
    /// SO_REUSEPORT socket per server CPU, each taking what its CPU's stack processed;
    /// drops are named per receiver, loss per test).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub receivers: Option<super::Receivers>,
    /// msgrate over UDP: send with GSO (UDP_SEGMENT: up to 64 datagrams per send, cut by the
    /// kernel; the datagrams on the wire are unchanged).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gso: bool,
    /// msgrate over UDP: receive with GRO (UDP_GRO: coalesced datagrams, cut by the segment
    /// size the kernel gives).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gro: bool,
    /// msgrate over UDP: both --gso and --gro (iperf3 --gsro).
    #[cfg_attr(feature = "clap", arg(long))]
    pub gsro: bool,
    /// rr, cps: request size (default 1; cps: 0 sends none).
    #[cfg_attr(feature = "clap", arg(long))]
    pub req_size: Option<ByteSize>,
    /// rr, cps: response size (default 1; cps: 0 sends none).
    #[cfg_attr(feature = "clap", arg(long))]
    pub resp_size: Option<ByteSize>,
    /// cps: how each connection ends: fin (the client closes first; its port waits in
    /// TIME_WAIT), rst (SO_LINGER 0, as ethr: no TIME_WAIT, no port exhaustion) or server (the
    /// server closes first, as netperf TCP_CRR: the TIME_WAIT is the server's).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub close: Option<CloseMode>,
    /// msgrate, rr: use UDP datagrams (set up over TCP) instead of TCP. Without --profile,
    /// the udp-1g profile (iperf3 -u).
    #[cfg_attr(feature = "clap", arg(long, short = 'u'))]
    pub udp: bool,
    /// Target bit rate per flow (iperf3 -b), e.g. 200M, 1G: UDP datagrams paced evenly;
    /// bulk TCP flows paced by the kernel (SO_MAX_PACING_RATE). 0: no limit.
    #[cfg_attr(feature = "clap", arg(long, short = 'b'))]
    pub bitrate: Option<crate::units::BitRate>,
    /// rr: how both ends wait for the next message: block (sleep in recv) or spin (busy-poll).
    #[cfg_attr(feature = "clap", arg(long, value_enum))]
    pub wait: Option<WaitMode>,
    /// rr: SO_BUSY_POLL in microseconds on both ends.
    #[cfg_attr(feature = "clap", arg(long))]
    pub busy_poll: Option<u32>,
    /// msgrate, rr, cps, bulk: server CPUs for the peer flows, flow i on the i-th (default for
    /// msgrate, rr and cps: the client's list, half the list away when the server is on this
    /// host; for bulk: unpinned, as iperf3 without -A).
    #[cfg_attr(feature = "clap", arg(long))]
    pub server_cpus: Option<CpuList>,
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
    /// http: fetch paths over HTTPS from --target.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tls: bool,
    /// http: accept any server certificate.
    #[cfg_attr(feature = "clap", arg(long, short = 'k'))]
    pub insecure: bool,
    /// http: trust the CA certificates in this PEM file.
    #[cfg_attr(feature = "clap", arg(long))]
    pub cacert: Option<String>,
    /// http: TLS server name to send and verify.
    #[cfg_attr(feature = "clap", arg(long))]
    pub sni: Option<String>,
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
    /// http: stop after this many requests in total.
    #[cfg_attr(feature = "clap", arg(long, short = 'n'))]
    pub requests: Option<u64>,
    /// http: open loop at this rate (e.g. 5000), or a ramp 1000..20000 (with --ramp).
    /// cps: new connections per second in all, spread over the flows.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rate: Option<String>,
    /// http: length of the --rate ramp (default: the whole run).
    #[cfg_attr(feature = "clap", arg(long))]
    pub ramp: Option<Dur>,
    /// http: per-request timeout (default 30s). cps: a connection not established or not
    /// answered within this long fails as timed out (default 3s).
    #[cfg_attr(feature = "clap", arg(long))]
    pub timeout: Option<Dur>,
}

/// Parses `--rate`: `5000`, `10k/s`, or a ramp `1000..20000`.
pub fn parse_rate_range(s: &str) -> Result<(Rate, Option<Rate>), String> {
    let (from, to) = match s.split_once("..") {
        Some((x, y)) => (x, Some(y)),
        None => (s, None),
    };
    let from: Rate = from.parse().map_err(|e| format!("{e}"))?;
    let to = to.map(|t| t.parse::<Rate>()).transpose().map_err(|e| format!("{e}"))?;
    Ok((from, to))
}

/// Whether a target is a URL (`http://…`, `https://…`): the test is then an HTTP one.
pub fn is_url(target: &str) -> bool {
    let t = target.to_ascii_lowercase();
    t.starts_with("http://") || t.starts_with("https://")
}

impl Overrides {
    /// The profile a run asks for: `name` (a built-in profile or a file), or without one
    /// `http-max` when a `--url` or a URL `target` says the test is HTTP, `udp-1g` with `--udp`,
    /// else `bulk-1flow`; with these overrides applied (a URL target requested as a
    /// `--url` would be) and validated. Returns it with its origin.
    pub fn profile(&self, name: Option<&str>, target: Option<&str>) -> Result<(Profile, String), SpecError> {
        let url_target = target.filter(|t| is_url(t));
        let name = match name {
            Some(p) => p,
            None if !self.urls.is_empty() || url_target.is_some() => "http-max",
            // -b alone never switches protocol: -u is the only way to UDP.
            None if self.udp => "udp-1g",
            None => "bulk-1flow",
        };
        let (mut profile, origin) = Profile::load(name)?;
        let mut overrides = self.clone();
        if let Some(u) = url_target {
            if !profile.workload.is_http() {
                return Err(SpecError::Flag {
                    flag: "--target".into(),
                    message: format!(
                        "{u} is a URL, but profile {name} is a {} test: name an http profile, or give HOST[:PORT]",
                        profile.kind().name()
                    ),
                });
            }
            overrides.urls.insert(0, u.to_string());
        }
        overrides.apply(&mut profile, &origin)?;
        let origin = if overrides.is_empty() { origin } else { format!("{origin} (with command-line overrides)") };
        profile.validate(&origin)?;
        Ok((profile, origin))
    }

    /// The kind-specific flags that are set, each with the kinds it applies to.
    fn kind_flags(&self) -> Vec<(&'static str, &'static [Kind])> {
        const BULK: &[Kind] = &[Kind::Bulk];
        const MSG: &[Kind] = &[Kind::Msgrate];
        const RR: &[Kind] = &[Kind::Rr];
        const MSG_RR: &[Kind] = &[Kind::Msgrate, Kind::Rr];
        const RR_CPS: &[Kind] = &[Kind::Rr, Kind::Cps];
        const CPS: &[Kind] = &[Kind::Cps];
        const HTTP_CPS: &[Kind] = &[Kind::Http, Kind::Cps];
        const BULK_MSG: &[Kind] = &[Kind::Bulk, Kind::Msgrate];
        const FLOWS: &[Kind] = &[Kind::Bulk, Kind::Msgrate, Kind::Rr, Kind::Cps];
        const HTTP: &[Kind] = &[Kind::Http];
        let set = [
            ("--flows", self.flows.is_some(), FLOWS),
            ("--bytes", self.bytes.is_some(), BULK),
            ("--omit", self.omit.is_some(), BULK),
            ("--reverse", self.reverse, BULK_MSG),
            ("--bidir", self.bidir, BULK_MSG),
            ("--block", self.block.is_some(), BULK_MSG),
            ("--bitrate", self.bitrate.is_some(), BULK_MSG),
            ("--zerocopy", self.send_mode.is_some(), BULK),
            ("--msg-size", self.msg_size.is_some(), MSG),
            ("--batch", self.batch.is_some(), MSG),
            ("--eor", self.eor.is_some(), MSG),
            ("--recv", self.recv.is_some(), MSG),
            ("--receivers", self.receivers.is_some(), MSG),
            ("--gso", self.gso, MSG),
            ("--gro", self.gro, MSG),
            ("--gsro", self.gsro, MSG),
            ("--req-size", self.req_size.is_some(), RR_CPS),
            ("--resp-size", self.resp_size.is_some(), RR_CPS),
            ("--wait", self.wait.is_some(), RR),
            ("--busy-poll", self.busy_poll.is_some(), RR),
            ("--udp", self.udp, MSG_RR),
            ("--server-cpus", self.server_cpus.is_some(), FLOWS),
            ("--url", !self.urls.is_empty(), HTTP),
            ("--method", self.method.is_some(), HTTP),
            ("--header", !self.headers.is_empty(), HTTP),
            ("--body", self.body.is_some(), HTTP),
            ("--body-file", self.body_file.is_some(), HTTP),
            ("--http1/--http2", self.http1 || self.http2, HTTP),
            ("--tls", self.tls, HTTP),
            ("--insecure", self.insecure, HTTP),
            ("--cacert", self.cacert.is_some(), HTTP),
            ("--sni", self.sni.is_some(), HTTP),
            ("--connections", self.connections.is_some(), HTTP),
            ("--streams", self.streams.is_some(), HTTP),
            ("--no-keepalive", self.no_keepalive, HTTP),
            ("--expect-status", self.expect_status.is_some(), HTTP),
            ("--requests", self.requests.is_some(), HTTP),
            ("--rate", self.rate.is_some(), HTTP_CPS),
            ("--ramp", self.ramp.is_some(), HTTP),
            ("--timeout", self.timeout.is_some(), HTTP_CPS),
            ("--close", self.close.is_some(), CPS),
        ];
        set.into_iter().filter(|(_, on, _)| *on).map(|(f, _, k)| (f, k)).collect()
    }

    /// Whether no flag is set.
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }

    /// Applies the flags to `p`. A flag of another kind is an error naming it. When anything
    /// changed, the description is rewritten from the result, naming `origin`.
    pub fn apply(&self, p: &mut Profile, origin: &str) -> Result<(), SpecError> {
        let kind = p.kind();
        if let Some((flag, kinds)) = self.kind_flags().into_iter().find(|(_, kinds)| !kinds.contains(&kind)) {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            return Err(flag_err(
                flag,
                format!("applies to {} tests; this profile's kind is {}", names.join(" and "), kind.name()),
            ));
        }
        if self.is_empty() {
            return Ok(());
        }
        let run = &mut p.run;
        set_some(&mut run.duration, self.duration);
        set_some(&mut run.interval, self.interval);
        set_some(&mut run.omit, self.omit);
        set_some(&mut run.cpus, self.cpus.clone());
        let tcp = &mut p.tcp;
        set_some(&mut tcp.window, self.window);
        set_some(&mut tcp.sndbuf, self.sndbuf);
        set_some(&mut tcp.rcvbuf, self.rcvbuf);
        set_some(&mut tcp.mss, self.mss);
        set_some(&mut tcp.congestion, self.congestion.clone());
        if self.nodelay {
            tcp.nodelay = Some(true);
        }
        match &mut p.workload {
            Workload::Bulk(b) => self.apply_bulk(b, &mut p.run),
            Workload::Msgrate(m) => self.apply_msgrate(m),
            Workload::Rr(r) => self.apply_rr(r),
            Workload::Cps(c) => self.apply_cps(c)?,
            Workload::Http(h) => self.apply_http(h, &mut p.run)?,
        }
        p.description = format!("{} ({origin} with command-line overrides)", p.workload.describe(&p.run));
        Ok(())
    }

    /// The bulk flags (`--bytes` makes the byte count the bound, as iperf3 -n).
    fn apply_bulk(&self, b: &mut super::BulkSection, run: &mut super::RunSection) {
        set(&mut b.flows, self.flows);
        if let Some(n) = self.bytes {
            b.bytes = Some(n);
            if self.duration.is_none() {
                // As iperf3 -n: the byte count is the bound; the time cap still applies.
                run.duration = None;
            }
        }
        if self.reverse {
            b.direction = Direction::Reverse;
        }
        if self.bidir {
            b.direction = Direction::Bidir;
        }
        set(&mut b.block_bytes, self.block);
        set(&mut b.send_mode, self.send_mode);
        if let Some(r) = self.bitrate {
            // -b 0: as fast as TCP goes (iperf3's unlimited). A TCP test stays TCP: -u is the
            // only way to UDP.
            b.bitrate = (r.0 > 0.0).then_some(r);
        }
        if self.server_cpus.is_some() {
            b.server_cpus = self.server_cpus.clone();
        }
    }

    /// The msgrate flags.
    fn apply_msgrate(&self, m: &mut super::MsgrateSection) {
        if self.flows.is_some() {
            m.flows = self.flows;
        }
        // -l is the datagram (message) size here, as iperf3 -u -l.
        set(&mut m.msg_bytes, self.msg_size.or(self.block));
        set(&mut m.batch, self.batch);
        set(&mut m.eor, self.eor);
        if self.reverse {
            m.direction = Direction::Reverse;
        }
        if self.bidir {
            m.direction = Direction::Bidir;
        }
        if let Some(b) = self.bitrate {
            // -b 0: as fast as the sender can (iperf3's unlimited).
            m.bitrate = (b.0 > 0.0).then_some(b);
        }
        set(&mut m.recv, self.recv);
        set(&mut m.receivers, self.receivers);
        m.gso |= self.gso || self.gsro;
        m.gro |= self.gro || self.gsro;
        if self.udp {
            m.protocol = Protocol::Udp;
            // A datagram is its own packet: a TCP profile's record marks do not carry over.
            m.eor = self.eor == Some(true);
        }
        if self.server_cpus.is_some() {
            m.server_cpus = self.server_cpus.clone();
        }
    }

    /// The rr flags.
    fn apply_rr(&self, r: &mut super::RrSection) {
        set(&mut r.flows, self.flows);
        set(&mut r.req_bytes, self.req_size);
        set(&mut r.resp_bytes, self.resp_size);
        if self.udp {
            r.protocol = Protocol::Udp;
        }
        set(&mut r.wait, self.wait);
        if self.busy_poll.is_some() {
            r.busy_poll_us = self.busy_poll;
        }
        if self.server_cpus.is_some() {
            r.server_cpus = self.server_cpus.clone();
        }
    }

    /// The cps flags (one rate: a ramp is refused).
    fn apply_cps(&self, c: &mut super::CpsSection) -> Result<(), SpecError> {
        if self.flows.is_some() {
            c.flows = self.flows;
        }
        set(&mut c.req_bytes, self.req_size);
        set(&mut c.resp_bytes, self.resp_size);
        if let Some(r) = &self.rate {
            let (rate, to) = parse_rate_range(r).map_err(|e| flag_err("--rate", e))?;
            if to.is_some() {
                return Err(flag_err("--rate", "a cps test runs at one rate; ramps are for http tests".into()));
            }
            c.rate = Some(rate);
        }
        if self.timeout.is_some() {
            c.timeout = self.timeout;
        }
        set(&mut c.close, self.close);
        if self.server_cpus.is_some() {
            c.server_cpus = self.server_cpus.clone();
        }
        Ok(())
    }

    /// The http flags (`--requests` makes the request count the bound, as hey -n).
    fn apply_http(&self, h: &mut super::HttpSection, run: &mut super::RunSection) -> Result<(), SpecError> {
        if !self.urls.is_empty() {
            h.urls = self.urls.clone();
            h.weights = None;
        }
        if let Some(m) = &self.method {
            h.method = m.to_ascii_uppercase();
        }
        h.headers.extend(self.headers.iter().cloned());
        if self.body.is_some() {
            h.body = self.body.clone();
            h.body_file = None;
        }
        if self.body_file.is_some() {
            h.body_file = self.body_file.clone();
            h.body = None;
        }
        if self.http1 {
            h.version = HttpVersion::Http1;
        } else if self.http2 {
            h.version = HttpVersion::Http2;
        }
        h.tls |= self.tls;
        h.insecure |= self.insecure;
        if self.cacert.is_some() {
            h.cacert = self.cacert.clone();
        }
        if self.sni.is_some() {
            h.sni = self.sni.clone();
        }
        set(&mut h.connections, self.connections);
        set(&mut h.streams, self.streams);
        if self.no_keepalive {
            h.keepalive = false;
        }
        if self.expect_status.is_some() {
            h.expect_status = self.expect_status.clone();
        }
        if let Some(n) = self.requests {
            h.requests = Some(n);
            if self.duration.is_none() {
                // As hey -n: the request count is the bound; the time cap still applies.
                run.duration = None;
            }
        }
        if let (Some(d), false, None) = (self.duration, h.steps.is_empty(), &self.rate) {
            // A sweep's length is its steps': -t is each step's length (said in the
            // description: "N steps of D each"), never a cut after the first steps.
            for step in &mut h.steps {
                step.duration = d;
            }
            run.duration = None;
        }
        if let Some(r) = &self.rate {
            let (from, to) = parse_rate_range(r).map_err(|e| flag_err("--rate", e))?;
            h.steps.clear();
            h.rate = Some(from);
            h.rate_to = to;
        }
        if self.ramp.is_some() {
            h.ramp = self.ramp;
        }
        if self.timeout.is_some() {
            h.timeout = self.timeout;
        }
        Ok(())
    }
}

/// An error naming the flag at fault.
fn flag_err(flag: &str, message: String) -> SpecError {
    SpecError::Flag { flag: flag.to_string(), message }
}

fn set_some<T>(field: &mut Option<T>, v: Option<T>) {
    if v.is_some() {
        *field = v;
    }
}

fn set<T>(field: &mut T, v: Option<T>) {
    if let Some(v) = v {
        *field = v;
    }
}

/// `-c`/`--connections`: a count. Anything else (iperf3's `-c HOST`) is answered with the
/// meaning taken and the command for the other.
#[cfg(feature = "clap")]
pub fn parse_connections(s: &str) -> Result<u32, String> {
    s.parse::<u32>().map_err(|_| {
        format!(
            "-c is --connections here, a count (as wrk and h2load take it); for iperf3's -c {s}, \
             give the server as `netblast run {s}`"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn description_follows_the_flags() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let o = Overrides { flows: Some(64), duration: Some("3s".parse().unwrap()), ..Default::default() };
        o.apply(&mut p, &origin).unwrap();
        p.validate("x").unwrap();
        assert!(p.description.contains("64 TCP flows") && p.description.contains("3s"), "{}", p.description);
        assert!(p.description.contains("bulk-1flow"), "{}", p.description);
    }

    #[test]
    fn duration_of_a_sweep_is_each_steps() {
        let (mut p, origin) = Profile::load("http-sweep").unwrap();
        let steps = match &p.workload {
            Workload::Http(h) => h.steps.len(),
            _ => unreachable!(),
        };
        let o = Overrides { duration: Some("2s".parse().unwrap()), ..Default::default() };
        o.apply(&mut p, &origin).unwrap();
        p.validate("x").unwrap();
        assert_eq!(p.workload.time_bound(&p.run), std::time::Duration::from_secs(2 * steps as u64));
        let want = format!("{steps} steps of 2s each");
        assert!(p.description.contains(&want), "{}", p.description);
        assert!(p.description.contains(&format!("{}s in all", 2 * steps)), "{}", p.description);
    }

    #[test]
    fn flags_of_another_kind_name_the_flag() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let o = Overrides { wait: Some(WaitMode::Spin), ..Default::default() };
        let e = o.apply(&mut p, &origin).unwrap_err().to_string();
        assert!(e.contains("--wait") && e.contains("rr") && e.contains("bulk"), "{e}");
        let o = Overrides { rate: Some("5000".into()), ..Default::default() };
        assert!(o.apply(&mut p, &origin).unwrap_err().to_string().contains("--rate"));
    }

    #[test]
    fn bitrate_never_switches_the_protocol() {
        // Found: `-b 1G` on a TCP run became a UDP test without a word. It paces TCP now.
        let b = Overrides { bitrate: Some("1G".parse().unwrap()), ..Default::default() };
        let (mut p, _) = b.profile(None, Some("10.0.0.1")).unwrap();
        assert_eq!(p.kind(), Kind::Bulk);
        assert_eq!(p.workload.bulk_mut().and_then(|b| b.bitrate).map(|r| r.0), Some(1e9));
        let (p, _) = b.profile(Some("bulk-64flows"), None).unwrap();
        assert!(p.description.contains("each paced to"), "{}", p.description);
        let off = Overrides { bitrate: Some("0".parse().unwrap()), ..Default::default() };
        assert_eq!(off.profile(None, Some("10.0.0.1")).unwrap().0.workload.bulk_mut().unwrap().bitrate, None);
        let rr = Overrides { bitrate: b.bitrate, ..Default::default() };
        assert!(rr.profile(Some("latency"), None).unwrap_err().to_string().contains("--bitrate"));
        let u = Overrides { udp: true, ..b };
        let (p, _) = u.profile(None, Some("10.0.0.1")).unwrap();
        assert_eq!(p.kind(), Kind::Msgrate);
    }

    #[test]
    fn no_flags_keep_the_description() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let before = p.description.clone();
        Overrides::default().apply(&mut p, &origin).unwrap();
        assert_eq!(p.description, before);
    }

    #[test]
    fn rates_and_ramps_parse() {
        let (a, b) = parse_rate_range("1000..20k").unwrap();
        assert_eq!((a.per_second(), b.unwrap().per_second()), (1000.0, 20000.0));
        assert!(parse_rate_range("fast").is_err());
    }
}
