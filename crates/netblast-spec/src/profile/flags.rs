//! The command line's profile flags that more than one kind reads, and what every kind's flags
//! are applied with. Each kind's own flags are in its file, beside the fields they set
//! (`BulkFlags` in `bulk.rs`, ...); [`super::Overrides`] puts them together.

use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};

/// The flags more than one kind reads (each kind's own are in its file), and the run's
/// length, which bulk's `--bytes` and http's `--requests` and steps read too.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct SharedFlags {
    /// Test length, e.g. 10s, 1m.
    #[cfg_attr(feature = "clap", arg(long, short = 't'))]
    pub duration: Option<Dur>,
    /// Parallel flows, as iperf3 -P (bulk: per direction; msgrate and rr: one per pinned CPU).
    #[cfg_attr(feature = "clap", arg(long, short = 'P', visible_alias = "parallel"))]
    pub flows: Option<u32>,
    /// Server sends, client receives.
    #[cfg_attr(feature = "clap", arg(long, short = 'R', conflicts_with = "bidir"))]
    pub reverse: bool,
    /// Both directions at once, on separate connections.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bidir: bool,
    /// Bytes per send call (iperf3 -l); msgrate: bytes per message or datagram.
    #[cfg_attr(feature = "clap", arg(long, short = 'l'))]
    pub block: Option<ByteSize>,
    /// rr, cps: request size (default 1; cps: 0 sends none).
    #[cfg_attr(feature = "clap", arg(long))]
    pub req_size: Option<ByteSize>,
    /// rr, cps: response size (default 1; cps: 0 sends none).
    #[cfg_attr(feature = "clap", arg(long))]
    pub resp_size: Option<ByteSize>,
    /// msgrate, rr: use UDP datagrams (set up over TCP) instead of TCP. Without --profile,
    /// the udp-1g profile (iperf3 -u).
    #[cfg_attr(feature = "clap", arg(long, short = 'u'))]
    pub udp: bool,
    /// Target bit rate per flow (iperf3 -b), e.g. 200M, 1G: UDP datagrams paced evenly;
    /// bulk TCP flows held by a schedule, the kernel pacing 25% above it. 0: no limit. UP/DOWN
    /// (1G/200M): the client-to-server flows' rate and the server-to-client flows' (--bidir,
    /// -R). With --find-max, the range searched: 50M..1G.
    #[cfg_attr(feature = "clap", arg(long, short = 'b'))]
    pub bitrate: Option<crate::units::BitRateArg>,
    /// msgrate, rr, cps, bulk: server CPUs for the peer flows, flow i on the i-th (default for
    /// msgrate, rr and cps: the client's list, half the list away when the server is on this
    /// host; for bulk: unpinned, as iperf3 without -A).
    #[cfg_attr(feature = "clap", arg(long))]
    pub server_cpus: Option<CpuList>,
    /// http: open loop at this rate (e.g. 5000), or a ramp 1000..20000 (with --ramp).
    /// cps: new connections per second in all, spread over the flows. rr: round trips per
    /// second in all, spread over the flows (each request on its schedule; default back to
    /// back). With --find-max, the range searched: 100..50k.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rate: Option<String>,
    /// http: per-request timeout (default 30s). cps: a connection not established or not
    /// answered within this long fails as timed out (default 3s).
    #[cfg_attr(feature = "clap", arg(long))]
    pub timeout: Option<Dur>,
    /// A count bound, by the kind: http, requests in total (hey -n, as --requests); bulk,
    /// bytes in total (iperf3 -n 1G, as --bytes). The duration still caps the run.
    #[cfg_attr(feature = "clap", arg(short = 'n', value_name = "REQUESTS|BYTES"))]
    pub count: Option<String>,
    /// http: fetch paths over HTTPS from --target. cps with --no-agent: a TLS handshake on
    /// every connection.
    #[cfg_attr(feature = "clap", arg(long))]
    pub tls: bool,
    /// http, cps: accept any server certificate.
    #[cfg_attr(feature = "clap", arg(long, short = 'k'))]
    pub insecure: bool,
    /// http, cps: trust the CA certificates in this PEM file.
    #[cfg_attr(feature = "clap", arg(long))]
    pub cacert: Option<String>,
    /// http, cps: TLS server name to send and verify.
    #[cfg_attr(feature = "clap", arg(long))]
    pub sni: Option<String>,
}

impl SharedFlags {
    /// The flags that are set (`--duration` aside, which every kind takes); which kinds take
    /// each is theirs to say ([`super::Section::shared_flags`]).
    pub(crate) fn set(&self) -> Vec<&'static str> {
        // In the order of NAMES.
        let on = [
            self.flows.is_some(),
            self.reverse,
            self.bidir,
            self.block.is_some(),
            self.req_size.is_some(),
            self.resp_size.is_some(),
            self.udp,
            self.bitrate.is_some(),
            self.server_cpus.is_some(),
            self.rate.is_some(),
            self.timeout.is_some(),
            self.count.is_some(),
            self.tls,
            self.insecure,
            self.cacert.is_some(),
            self.sni.is_some(),
        ];
        Self::NAMES.into_iter().zip(on).filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }

    /// Every flag the command line shares between kinds, in the order `SharedFlags::set`
    /// reads them: what each kind's [`super::Section::shared_flags`] is checked against.
    pub const NAMES: [&'static str; 16] = [
        "--flows",
        "--reverse",
        "--bidir",
        "--block",
        "--req-size",
        "--resp-size",
        "--udp",
        "--bitrate",
        "--server-cpus",
        "--rate",
        "--timeout",
        "-n",
        "--tls",
        "--insecure",
        "--cacert",
        "--sni",
    ];
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

/// An error naming the flag at fault.
pub(crate) fn flag_err(flag: &str, message: String) -> SpecError {
    SpecError::Flag { flag: flag.to_string(), message }
}

pub(crate) fn set_some<T>(field: &mut Option<T>, v: Option<T>) {
    if v.is_some() {
        *field = v;
    }
}

pub(crate) fn set<T>(field: &mut T, v: Option<T>) {
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

/// The down rate of `-b UP/DOWN`: none when the same as up; 0 (no limit) only with an up rate
/// of 0 too (an up limit falls back on the down flows otherwise).
pub(crate) fn down_rate(
    up: crate::units::BitRate,
    down: Option<crate::units::BitRate>,
) -> Result<Option<crate::units::BitRate>, SpecError> {
    match down {
        Some(d) if d.0 == 0.0 && up.0 > 0.0 => Err(flag_err(
            "--bitrate",
            format!(
                "{up}/0: the server-to-client flows without a limit and the others held is not taken; give both rates"
            ),
        )),
        Some(d) if d.0 > 0.0 && d != up => Ok(Some(d)),
        _ => Ok(None),
    }
}

/// `--rate`'s one rate for a kind that runs at one (`test`: "a cps test runs"): a ramp is
/// refused, naming the kind.
pub(crate) fn one_rate(r: &str, test: &str) -> Result<crate::units::Rate, SpecError> {
    let (rate, to) = parse_rate_range(r).map_err(|e| flag_err("--rate", e))?;
    match to {
        None => Ok(rate),
        Some(_) => Err(flag_err("--rate", format!("{test} at one rate; ramps are for http tests"))),
    }
}

/// `-b`'s one rate (and with `UP/DOWN` the down rate): a range is what `--find-max` searches,
/// refused anywhere else.
pub(crate) fn one_bitrate(
    b: crate::units::BitRateArg,
) -> Result<(crate::units::BitRate, Option<crate::units::BitRate>), SpecError> {
    match b.to {
        None => Ok((b.from, b.down)),
        Some(to) => Err(flag_err(
            "--bitrate",
            format!("{}..{to} is a range, which --find-max searches; give one rate without it", b.from),
        )),
    }
}
