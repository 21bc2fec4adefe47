//! The command line: every flag defined once here; help is generated from these docs.

use crate::outcome::AppError;
use clap::{Args, Parser, Subcommand};
use netblast_spec::units::{ByteSize, Dur};
use std::net::IpAddr;
use std::path::PathBuf;

/// netblast: one engine for bulk TCP, message rate, latency and HTTP load, with kernel TCP
/// statistics beside the application's figures.
#[derive(Debug, Parser)]
#[command(name = "netblast", version, about, disable_version_flag = true)]
pub struct Cli {
    /// Print the version (-V under `run` is iperf3's --verbose).
    #[arg(long, action = clap::ArgAction::Version)]
    pub version: Option<bool>,
    /// Log level for diagnostics on stderr (error, warn, info, debug, trace).
    #[arg(long, global = true, default_value = "warn", env = "NETBLAST_LOG")]
    pub log: String,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the traffic peer that tests connect to (like `iperf3 -s`, for many clients at once).
    Serve(ServeArgs),
    /// Run a test: against a `netblast serve` (bulk, msgrate, rr, cps, hold) or any HTTP server (http).
    Run(Box<RunArgs>),
    /// List the built-in profiles.
    Profiles,
    /// Render a saved JSON result as the human report.
    Report(ReportArgs),
    /// Merge results of tests that ran at the same time (on one host or many) into one.
    Merge(MergeArgs),
    /// Run one profile on many agents (`netblast serve` elsewhere) at once, merged exactly.
    Fleet(Box<FleetArgs>),
    /// Run a campaign: a matrix of settings × repeats from a file, each run's result kept in a
    /// directory as it ends, one summary with medians and confidence intervals (resumable).
    Campaign(CampaignArgs),
    /// Say what this host supports: privilege, BTF, cgroup v2, eBPF probe, CPUs, fd limit.
    Doctor,
}

/// `netblast serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; `::` accepts IPv4 and IPv6.
    #[arg(long, short = 'B', default_value = "::")]
    pub bind: IpAddr,
    /// Take connections and datagrams only on this interface (SO_BINDTODEVICE), e.g. a VXLAN
    /// interface.
    #[arg(long, value_name = "IFACE")]
    pub bind_dev: Option<String>,
    /// The ports a flow's own sockets take (a cps flow's listener, a UDP flow's socket), e.g.
    /// 5234-5237: a Kubernetes Service, a load balancer or a firewall rule can then name them
    /// (default: any the kernel picks). A flow finds every port taken: it is refused, saying so.
    #[arg(long, value_name = "LO-HI", value_parser = parse_port_range)]
    pub flow_ports: Option<(u16, u16)>,
    /// Serve Prometheus metrics on http://ADDR/metrics (OpenMetrics text): tests running and
    /// finished, bytes and messages by direction, retransmits, refusals, HTTP responses by
    /// code, responder latency and kernel RTT histograms. No authentication: bind it to
    /// loopback or a monitoring network.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Data port: every test kind shares it.
    #[arg(long, short = 'p', default_value_t = netblast_spec::plan::DEFAULT_PORT)]
    pub port: u16,
    /// File holding the shared token: clients must prove it (HMAC challenge-response; the
    /// token never crosses the wire). Without one, only loopback peers are accepted.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Without a token, accept peers that are not on loopback too (no authentication at all).
    #[arg(long, conflicts_with = "token_file")]
    pub open: bool,
    /// As a fleet agent: networks orders may send traffic to (repeatable; default: the
    /// networks of this host's interfaces and loopback).
    #[arg(long = "allow", value_name = "CIDR")]
    pub allow: Vec<netblast_spec::units::Cidr>,
    /// As a fleet agent: dial this coordinator (`netblast fleet --listen`) and wait for its
    /// orders, dialing again whenever the session ends (needs --token-file).
    #[arg(long, value_name = "HOST:PORT", requires = "token_file")]
    pub register: Option<String>,
    /// Tests one peer address may have set up and waiting at once.
    #[arg(long, default_value_t = 16)]
    pub max_pending_per_peer: usize,
    /// Connections one peer address may hold before they prove themselves (a netblast peer
    /// needs a few; past it a new one closes that address's oldest silent one).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unproven_per_peer: u32,
    /// Connections all peers together may hold before they prove themselves (at most a
    /// quarter of the descriptors; the rest is kept for peers that proved the token); past
    /// it a new one closes an old one of the address holding the most.
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_unproven: u32,
    /// Server flows that may busy-poll (rr --wait spin) at once, each taking a CPU
    /// (default: usable CPUs - 1).
    #[arg(long)]
    pub max_spinning: Option<usize>,
    /// As a registering agent: the group it joins (`--clients registered:GROUP:N`).
    #[arg(long, default_value = "default", requires = "register")]
    pub group: String,
    /// Source of TCP statistics for the server's sockets: auto (eBPF, else TCP_INFO), ebpf,
    /// tcpinfo or off.
    #[arg(long, default_value = "auto")]
    pub probe: netblast_probe::ProbeMode,
    /// Also answer HTTP/1.1 and h2c on this port (the built-in responder; 0: any free port).
    #[arg(long, value_name = "PORT")]
    pub http: Option<u16>,
    /// Also answer HTTPS (HTTP/1.1 and h2 by ALPN) on this port.
    #[arg(long, value_name = "PORT")]
    pub https: Option<u16>,
    /// PEM certificate chain for --https (default: a self-signed certificate made at start).
    #[arg(long, requires = "key")]
    pub cert: Option<String>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    pub key: Option<String>,
    /// Response body size when a request does not ask (`?size=`).
    #[arg(long, default_value = "45")]
    pub http_size: ByteSize,
    /// Largest body a request may ask for (`?size=`, at most 1GiB); larger asks get 400.
    #[arg(long, default_value = "64MiB")]
    pub http_max_body: ByteSize,
    /// Most HTTP connections open at once (more are closed as they come; the descriptor
    /// limit lowers it).
    #[arg(long, default_value_t = netblast_agent::http::MAX_CONNECTIONS)]
    pub http_max_connections: usize,
    /// Most HTTP connections one peer address may hold open at once (default: half of
    /// --http-max-connections, so one address never takes every slot).
    #[arg(long)]
    pub http_max_per_peer: Option<usize>,
    /// How long an HTTP connection may take to send its first byte or a request's headers,
    /// and may sit idle between requests.
    #[arg(long, default_value = "15s")]
    pub http_timeout: Dur,
    /// The DSCP mark of what the responders send and of the data port's SYN-ACKs (EF, AF41,
    /// CS1, 0-63): a test's --dscp marks its own flows both ways without it.
    #[arg(long, value_name = "DSCP")]
    pub dscp: Option<netblast_spec::mark::Dscp>,
}

/// The profile and the flags that change it (shared by `run` and `fleet`).
#[derive(Debug, Clone, Args)]
pub struct ProfileArgs {
    /// Built-in profile name or path to a TOML profile (default: bulk-1flow; http-max when
    /// a --url or an http:// or https:// target is given).
    #[arg(long)]
    pub profile: Option<String>,
    /// The flags that change the profile.
    #[command(flatten)]
    pub overrides: netblast_spec::profile::Overrides,
    /// A name for this run kept in its result (e.g. idps-off): what `report --compare` calls
    /// it beside other runs.
    #[arg(long, value_name = "NAME")]
    pub label: Option<String>,
}

/// `netblast run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// No interval lines and no status line: only the summary (or the JSON).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Say what the run set up, as iperf3 -V: each stream's socket as its kernel holds it once
    /// connected (buffers, congestion control, MSS, TCP_NODELAY, DSCP) and where it is pinned.
    #[arg(long, short = 'V')]
    pub verbose: bool,
    /// Source address of every connection (iperf3 -B); several, comma separated, or a prefix
    /// (10.1.0.0/29: its host addresses) spread the flows and connections over them in turn,
    /// as SNAT and ECMP tests need. Each must be this host's.
    #[arg(long, short = 'B', value_name = "ADDR[,ADDR..]|PREFIX", value_parser = parse_sources)]
    pub bind: Option<Sources>,
    /// Source port of the data connections (iperf3 --cport), or a range LO-HI spread over the
    /// flows and connections in turn (a range smaller than the flows is refused). The
    /// control connection takes any port.
    #[arg(long, value_name = "PORT|LO-HI", value_parser = parse_port_range)]
    pub cport: Option<(u16, u16)>,
    /// Send and receive only through this interface (SO_BINDTODEVICE), e.g. a VXLAN interface.
    #[arg(long, value_name = "IFACE")]
    pub bind_dev: Option<String>,
    /// Write the latency histograms of every interval as an HdrHistogram interval log (tags
    /// up, down, http; values in ns), for HdrHistogram's tools.
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,
    /// A threshold on the result, e.g. 'throughput>=9Gbit/s', 'p99<5ms', 'errors==0',
    /// 'retransmits<0.1%' (repeatable; grammar in docs/metrics.md). Each is printed pass or
    /// FAIL; any failure exits 4.
    #[arg(long = "assert", value_name = "EXPR", value_parser = parse_assertion)]
    pub assert: Vec<netblast_spec::assert::Assertion>,
    /// The server: HOST, HOST:PORT or `[IPv6]:PORT` (http: where paths in the profile go).
    #[arg(long)]
    pub target: Option<String>,
    /// The server, as iperf3 takes it (`netblast run HOST`): the same as --target.
    #[arg(value_name = "HOST", conflicts_with = "target")]
    pub host: Option<String>,
    /// The server's data port, as iperf3's -p (default 5210; a port in the target wins only
    /// when it is the same).
    #[arg(long = "port", short = 'p', value_name = "PORT")]
    pub port: Option<u16>,
    /// Only IPv4: a target name resolves to its IPv4 address (iperf3 -4).
    #[arg(short = '4', long = "version4", conflicts_with = "ipv6")]
    pub ipv4: bool,
    /// Only IPv6: a target name resolves to its IPv6 address (iperf3 -6).
    #[arg(short = '6', long = "version6")]
    pub ipv6: bool,
    /// The test: the profile and the flags that change it.
    #[command(flatten)]
    pub test: ProfileArgs,
    /// Find the highest rate at which every --assert holds: steps of -t (default 2s) after a
    /// warm-up, over the range of --rate LOW..HIGH (http, cps) or -b LOW..HIGH (per flow), to
    /// this resolution (default 5%). The method is in docs/metrics.md.
    #[arg(long, value_name = "RESOLUTION", num_args = 0..=1, default_missing_value = "5%", value_parser = parse_share)]
    pub find_max: Option<f64>,
    /// File holding the token the server asks for (default: the NETBLAST_TOKEN variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Start at this instant, so runs on several hosts cover the same intervals: RFC 3339
    /// (2026-11-23T10:00:00Z), Unix seconds (1795000000), or +DURATION from now (+5s).
    /// Default: the next interval boundary of the wall clock.
    #[arg(long, value_name = "TIME")]
    pub start_at: Option<String>,
    /// Source of TCP statistics: auto (eBPF, else TCP_INFO, saying why), ebpf, tcpinfo or off.
    #[arg(long, default_value = "auto")]
    pub probe: netblast_probe::ProbeMode,
    /// Also measure the eBPF probe's own kernel run time (BPF_ENABLE_STATS while the run lasts).
    #[arg(long)]
    pub probe_stats: bool,
    /// Print the JSON result instead of the human report.
    #[arg(long, short = 'J')]
    pub json: bool,
    /// Also write the JSON result to this file (atomically; intervals stream to
    /// FILE.partial.jsonl while the run lasts).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Print the server's own lines about the test after the summary (iperf3
    /// --get-server-output); the result keeps them either way (`server_output`).
    #[arg(long)]
    pub get_server_output: bool,
    /// One JSON object per line on stdout as the run goes (iperf3 --json-stream):
    /// {"event":"start",...} with the plan and streams, one {"event":"interval",...} per
    /// interval as it ends, then {"event":"end","data":RESULT}; each line parses alone (jq -c).
    #[arg(long, conflicts_with_all = ["json", "find_max"])]
    pub json_stream: bool,
    /// Append what would go to stdout to this file instead (iperf3 --logfile); errors stay on
    /// stderr.
    #[arg(long, value_name = "FILE")]
    pub logfile: Option<PathBuf>,
    /// Start every output line with the local time in this strftime format (iperf3
    /// --timestamps; default "%c "). Give a format with `=`: --timestamps='%T '.
    #[arg(long, value_name = "FORMAT", num_args = 0..=1, default_missing_value = "%c ", require_equals = true)]
    pub timestamps: Option<String>,
}

/// `netblast fleet`.
#[derive(Debug, Clone, Args)]
pub struct FleetArgs {
    /// A threshold on the result, e.g. 'throughput>=9Gbit/s', 'p99<5ms', 'errors==0',
    /// 'retransmits<0.1%' (repeatable; grammar in docs/metrics.md). Each is printed pass or
    /// FAIL; any failure exits 4.
    #[arg(long = "assert", value_name = "EXPR", value_parser = parse_assertion)]
    pub assert: Vec<netblast_spec::assert::Assertion>,
    /// Find the highest rate at which every --assert holds, each step a whole fleet with every
    /// client at the step's --rate or -b (as the fleet runs the profile), judged on the fleet's
    /// merged figures: the range of --rate LOW..HIGH or -b LOW..HIGH, to this resolution
    /// (default 5%). The method is in docs/metrics.md.
    #[arg(long, value_name = "RESOLUTION", num_args = 0..=1, default_missing_value = "5%", value_parser = parse_share)]
    pub find_max: Option<f64>,
    /// Client agents (they originate the tests): HOST or HOST:PORT, comma separated; @FILE;
    /// dns:NAME or dns:NAME:PORT (every address the name has); registered:GROUP:N (wait for N
    /// agents of GROUP).
    #[arg(long, value_name = "LIST")]
    pub clients: String,
    /// Server agents (the peers): the same forms. Not needed for http against --url.
    #[arg(long, value_name = "LIST")]
    pub servers: Option<String>,
    /// Which client tests against which server: one-to-one (client i against server i mod S),
    /// spread (every server, the flows divided), mesh (every server, the whole profile each).
    #[arg(long, default_value = "one-to-one")]
    pub pairing: netblast_coord::pairing::Pairing,
    /// The test: the profile and the flags that change it.
    #[command(flatten)]
    pub test: ProfileArgs,
    /// File holding the fleet's token (default: the NETBLAST_TOKEN variable): agents must
    /// prove it and the coordinator proves it to them.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Take registrations of agents (`serve --register`) on this address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<std::net::SocketAddr>,
    /// Serve the coordinator's live fleet-wide figures as Prometheus metrics on
    /// http://ADDR/metrics while the fleet runs and --metrics-linger after: agents by state,
    /// tests running and reporting, bytes/s and responses/s of the latest interval, bytes,
    /// responses, errors, latency.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// With --metrics: how long the endpoint stays up after the result is written, holding the
    /// final counts, so a scrape after the last interval sees them (30s: two scrapes at
    /// Prometheus's usual 15 s interval). Ctrl-C ends it early.
    #[arg(long, value_name = "DURATION", default_value = "30s")]
    pub metrics_linger: Dur,
    /// How long to wait for agents to connect and register.
    #[arg(long, default_value = "60s")]
    pub wait_agents: Dur,
    /// Least time from the orders to the common start (every test is set up in it).
    #[arg(long, default_value = "2s")]
    pub lead: Dur,
    /// Print the JSON result instead of the human report.
    #[arg(long, short = 'J')]
    pub json: bool,
    /// With --json: the result on one line, not indented (a Kubernetes Job's log, which a
    /// kubelet rotates at 10 MiB by default, then holds four times the result).
    #[arg(long, requires = "json")]
    pub compact: bool,
    /// No agent and interval lines and no status line: only the summary (or the JSON).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Write the fleet's result to this file (atomically); every frame the agents send is
    /// appended to FILE.fleet.jsonl as it arrives.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Where to append the agents' frames (default: beside --output, else
    /// fleet-UNIXTIME-PID.jsonl in $XDG_STATE_HOME/netblast or ~/.local/state/netblast, said at
    /// the start); `netblast report FILE` renders it.
    #[arg(long, value_name = "FILE")]
    pub frames: Option<PathBuf>,
}

/// `netblast campaign`.
#[derive(Debug, Args)]
pub struct CampaignArgs {
    /// The campaign file (TOML: a base profile, `[set]`, `[axes]`, repeats; docs/profiles.md).
    pub file: PathBuf,
    /// The directory the runs go to: DIR/runs/CELL-rN.json as each ends, then
    /// DIR/summary.json, .csv and .html. The same command on the same DIR runs only what is
    /// missing (and what failed).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: PathBuf,
    /// The server of every cell, in place of the file's `target` (a run campaign; a fleet's
    /// servers are in its `[fleet]`).
    #[arg(long)]
    pub target: Option<String>,
    /// A setting in place of the file's (`duration=1s`, `clients=A,B`): a `[set]` or `[fleet]`
    /// key, `profile` or `target` (repeatable; kept with the campaign, so a resume gives the
    /// same).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// An axis's values in place of the file's (`target=10.0.0.4,10.0.1.4`; repeatable).
    #[arg(long = "axis", value_name = "NAME=V1,V2")]
    pub axis: Vec<String>,
    /// Runs per cell in place of the file's (more on a resume add runs).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeats: Option<u32>,
    /// Only resume: DIR must hold this campaign already.
    #[arg(long)]
    pub resume: bool,
    /// An earlier campaign's directory: each cell's change from the cell of the same settings
    /// there, with its interval.
    #[arg(long, value_name = "DIR")]
    pub baseline: Option<PathBuf>,
    /// Print each cell's command line and run nothing (every cell is checked as a run would
    /// be).
    #[arg(long)]
    pub dry_run: bool,
    /// Print the summary as JSON instead of the text.
    #[arg(long, short = 'J')]
    pub json: bool,
    /// No line per run: only the summary.
    #[arg(long, short = 'q')]
    pub quiet: bool,
}

/// `netblast report`.
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A threshold on the result, e.g. 'throughput>=9Gbit/s', 'p99<5ms', 'errors==0',
    /// 'retransmits<0.1%' (repeatable; grammar in docs/metrics.md). Each is printed pass or
    /// FAIL; any failure exits 4.
    #[arg(long = "assert", value_name = "EXPR", value_parser = parse_assertion)]
    pub assert: Vec<netblast_spec::assert::Assertion>,
    /// Results written by `netblast run --output`, `--json`, `netblast fleet -o` or
    /// `netblast merge` (or a partial or fleet frame log, or a campaign's summary.json). Several
    /// need --compare.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Print CSV instead of the text report: `intervals` (one row per interval and way; HTTP:
    /// per interval), `streams` (one row per interval and stream, with the kind's columns) or
    /// `tests` (a fleet's tests, one row each).
    #[arg(long, value_name = "ROWS", num_args = 0..=1, default_missing_value = "intervals")]
    pub csv: Option<crate::cli::CsvRows>,
    /// Write the latency histograms of every interval as an HdrHistogram interval log (tags
    /// up, down, http; values in ns), for HdrHistogram's tools.
    #[arg(long, value_name = "FILE")]
    pub hlog: Option<PathBuf>,
    /// Write the result as one self-contained HTML page with each kind's charts (inline SVG)
    /// and tables; with --compare, the runs side by side.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Set the runs side by side, the first the base: every headline figure of each with its
    /// change from the first (text, and --html). `report NEW.json --compare BASE.json` still
    /// works: BASE comes first.
    #[arg(long, value_name = "BASE.json", num_args = 0..=1, default_missing_value = "")]
    pub compare: Option<String>,
    /// Names of the compared runs, in order, comma-separated (default: each result's --label,
    /// else its file name).
    #[arg(long, value_delimiter = ',', value_name = "NAME,NAME,...")]
    pub labels: Vec<String>,
}

/// Which rows `report --csv` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CsvRows {
    /// One row per interval and way (HTTP: per interval).
    Intervals,
    /// One row per interval and stream.
    Streams,
    /// One row per test of a fleet or merged result.
    Tests,
}

/// `netblast merge`.
#[derive(Debug, Args)]
pub struct MergeArgs {
    /// Results to merge (netblast.run/4, /3 or /2, of the same kind and interval).
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the merged result here (atomically) instead of printing the report.
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Print the merged result as JSON.
    #[arg(long, short = 'J')]
    pub json: bool,
}

impl ServeArgs {
    /// The server these flags ask for.
    pub fn options(&self) -> Result<netblast_agent::server::ServerOptions, AppError> {
        let token = match &self.token_file {
            Some(f) => Some(netblast_wire::auth::Token::from_file(f).map_err(|e| AppError::input(anyhow::anyhow!(e)))?),
            None => None,
        };
        let mut limits = netblast_agent::Limits {
            pending_per_peer: self.max_pending_per_peer.max(1),
            unproven_per_peer: self.max_unproven_per_peer as usize,
            unproven: self.max_unproven as usize,
            ..Default::default()
        };
        if let Some(n) = self.max_spinning {
            limits.spinning = n;
        }
        Ok(netblast_agent::server::ServerOptions {
            bind: self.bind,
            port: self.port,
            bind_dev: self.bind_dev.clone(),
            flow_ports: self.flow_ports,
            metrics: self.metrics,
            access: netblast_agent::Access { token, open: self.open },
            allow: self.allow.clone(),
            group: self.group.clone(),
            register: self.register.clone(),
            probe: self.probe,
            limits,
            http: self.http,
            https: self.https,
            tls_files: self.cert.clone().zip(self.key.clone()),
            responder: netblast_agent::http::ResponderConfig {
                default_size: self.http_size.bytes(),
                max_body: self.http_max_body.bytes(),
                max_connections: self.http_max_connections.max(1),
                max_per_peer: self.http_max_per_peer.map(|n| n.max(1)),
                header_timeout: self.http_timeout.get(),
                ..Default::default()
            },
            dscp: self.dscp,
        })
    }
}

fn parse_assertion(s: &str) -> Result<netblast_spec::assert::Assertion, String> {
    netblast_spec::assert::Assertion::parse(s)
}

/// The token: from `file`, else from the `NETBLAST_TOKEN` variable; errors are bad input.
pub fn load_token(file: Option<&std::path::Path>) -> Result<Option<netblast_wire::auth::Token>, AppError> {
    let bad = |e: String| AppError::input(anyhow::anyhow!(e));
    match file {
        Some(f) => netblast_wire::auth::Token::from_file(f).map(Some).map_err(bad),
        None => match std::env::var("NETBLAST_TOKEN") {
            Ok(t) if !t.trim().is_empty() => {
                netblast_wire::auth::Token::new(&t).map(Some).map_err(|e| bad(format!("NETBLAST_TOKEN: {e}")))
            }
            _ => Ok(None),
        },
    }
}

/// The arguments with iperf3's `-c HOST` under `run` read as the target it is (`--target
/// HOST`): `-c` stays wrk's connection count where its value is one.
pub fn iperf3_args(mut args: Vec<String>) -> Vec<String> {
    if args.get(1).map(String::as_str) != Some("run") {
        return args;
    }
    let mut i = 2;
    while i + 1 < args.len() {
        if args[i] == "--" {
            break;
        }
        if args[i] == "-c" && args[i + 1].parse::<u32>().is_err() && !args[i + 1].starts_with('-') {
            args[i] = "--target".into();
            i += 1;
        }
        i += 1;
    }
    args
}

/// The command to type for an iperf3 habit netblast's top level does not take (`netblast -c
/// HOST`, `netblast -s`), or whose letter means another thing here (`run -k 1000`), or
/// `None`.
pub fn iperf3_hint(args: &[String]) -> Option<String> {
    match args.get(1).map(String::as_str) {
        Some("-c" | "--client") => {
            let host = args.get(2).map(String::as_str).unwrap_or("HOST");
            let rest: Vec<&str> = args.iter().skip(3).map(String::as_str).collect();
            let rest = if rest.is_empty() { String::new() } else { format!(" {}", rest.join(" ")) };
            Some(format!(
                "iperf3's -c {host} is `netblast run {host}{rest}` here (-p PORT, -t, -P, -R, -b as in iperf3; -c is \
                 --connections under run)"
            ))
        }
        Some("-s" | "--server") => Some("iperf3's -s is `netblast serve` here (-p PORT as in iperf3)".into()),
        Some("run") => {
            let k = args.windows(2).find(|w| w[0] == "-k" && w[1].parse::<u64>().is_ok())?;
            Some(format!(
                "iperf3's -k {n} (a block count) is --blockcount {n} here; -k is curl's --insecure (accept any \
                 certificate)",
                n = k[1]
            ))
        }
        _ => None,
    }
}

/// A share written as a percentage (`5%`, `2.5%`) or a fraction (`0.05`).
fn parse_share(s: &str) -> Result<f64, String> {
    let v = netblast_spec::units::parse_share(s)?;
    if !(0.001..=1.0).contains(&v) {
        return Err(format!("{s} is outside 0.1%..100%"));
    }
    Ok(v)
}

/// The request `run`'s flags make with `overrides` (theirs, or a search step's): the profile
/// they name with the overrides, the target, the start instant, the binding.
pub fn request(
    a: &RunArgs,
    overrides: &netblast_spec::profile::Overrides,
) -> Result<netblast_engine::run::Request, AppError> {
    let given = with_port(a.target.as_ref().or(a.host.as_ref()), a.port).map_err(AppError::input)?;
    let given = match (given, a.ipv4 || a.ipv6) {
        (Some(t), true) => Some(with_family(&t, a.ipv6).map_err(AppError::input)?),
        (g, _) => g,
    };
    let (profile, origin) = overrides.profile(a.test.profile.as_deref(), given.as_deref()).map_err(AppError::input)?;
    let http = profile.workload.aims_at_urls();
    let target = match &given {
        // A URL target is requested as a --url; the peer comes from it.
        Some(t) if http && netblast_spec::profile::is_url(t) => String::new(),
        Some(t) => t.clone(),
        None if http => String::new(),
        None => {
            return Err(AppError::input(anyhow::anyhow!(
                "a server is required: `netblast run HOST` or --target HOST[:PORT] (where does `netblast serve` run?)"
            )));
        }
    };
    let start_at_unix_ns = match &a.start_at {
        Some(at) => Some(
            netblast_spec::units::parse_instant(at, netblast_engine::exec::clock::now_unix_ns())
                .map_err(|e| AppError::input(anyhow::anyhow!("--start-at: {e}")))?,
        ),
        None => None,
    };
    let bind = netblast_spec::result::Binding {
        addrs: a.bind.clone().map(|s| s.0).unwrap_or_default(),
        ports: a.cport,
        device: a.bind_dev.clone(),
    };
    Ok(netblast_engine::run::Request {
        profile,
        origin,
        target,
        cpus_from_flag: overrides.cpus.is_some(),
        start_at_unix_ns,
        bind,
    })
}

/// The target with `-p PORT` put in: a host without a port takes it; a URL or a target whose
/// port is another is refused, naming both.
fn with_port(target: Option<&String>, port: Option<u16>) -> anyhow::Result<Option<String>> {
    let (t, p) = match (target, port) {
        (Some(t), Some(p)) => (t, p),
        (None, Some(p)) => anyhow::bail!("-p {p} needs a server: `netblast run HOST -p {p}`"),
        (t, None) => return Ok(t.cloned()),
    };
    if netblast_spec::profile::is_url(t) {
        anyhow::bail!("-p {p} is the data port; an HTTP URL carries its own port ({t})");
    }
    match netblast_spec::plan::split_host_port(t) {
        Some((_, Some(q))) if q != p => anyhow::bail!("the target {t} names port {q} and -p names {p}: give one"),
        Some((_, Some(_))) => Ok(Some(t.clone())),
        Some((host, None)) if host.contains(':') => Ok(Some(format!("[{host}]:{p}"))),
        Some((host, None)) => Ok(Some(format!("{host}:{p}"))),
        None => anyhow::bail!("cannot read the target {t:?}: HOST, HOST:PORT or [IPv6]:PORT"),
    }
}

/// `-B`'s source addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources(pub Vec<IpAddr>);

/// Most addresses `-B PREFIX` expands to.
const MOST_SOURCES: u128 = 1024;

/// `-B A,B,...` or `-B PREFIX`: every address named, or every host address of the prefix (an
/// IPv4 prefix shorter than /31 without its network and broadcast addresses).
fn parse_sources(s: &str) -> Result<Sources, String> {
    let mut out: Vec<IpAddr> = Vec::new();
    for part in s.split(',').map(str::trim) {
        if !part.contains('/') {
            out.push(part.parse().map_err(|_| format!("{part:?} is not an IP address (ADDR, ADDR,ADDR or PREFIX)"))?);
            continue;
        }
        let net: netblast_spec::units::Cidr = part.parse().map_err(|e| format!("{e}"))?;
        let (width, base) = match net.addr {
            IpAddr::V4(a) => (32u32, u128::from(u32::from(a))),
            IpAddr::V6(a) => (128u32, u128::from(a)),
        };
        let count = 1u128.checked_shl(width - u32::from(net.prefix)).unwrap_or(u128::MAX);
        let (first, last) =
            if net.addr.is_ipv4() && net.prefix < 31 { (1, count - 2) } else { (0, count.saturating_sub(1)) };
        if last - first + 1 > MOST_SOURCES {
            return Err(format!("{part} holds {} addresses: name at most {MOST_SOURCES}", last - first + 1));
        }
        for k in first..=last {
            out.push(match net.addr {
                IpAddr::V4(_) => IpAddr::V4(std::net::Ipv4Addr::from((base + k) as u32)),
                IpAddr::V6(_) => IpAddr::V6(std::net::Ipv6Addr::from(base + k)),
            });
        }
    }
    if out.iter().any(|a| a.is_ipv4() != out[0].is_ipv4()) {
        return Err(format!("{s}: IPv4 and IPv6 addresses together (a connection leaves from its own family)"));
    }
    let mut seen = std::collections::HashSet::new();
    if let Some(d) = out.iter().find(|a| !seen.insert(**a)) {
        return Err(format!("{d} is named twice"));
    }
    Ok(Sources(out))
}

/// The target with its host resolved to an address of one family (`-4`, `-6`): an address of
/// the other family, or a name with none of this one, is refused, naming both.
fn with_family(target: &str, v6: bool) -> anyhow::Result<String> {
    let (flag, family) = if v6 { ("-6", "IPv6") } else { ("-4", "IPv4") };
    if netblast_spec::profile::is_url(target) {
        anyhow::bail!("{flag} picks the family of a HOST target; a URL names its own address ({target})");
    }
    let Some((host, port)) = netblast_spec::plan::split_host_port(target) else {
        anyhow::bail!("cannot read the target {target:?}: HOST, HOST:PORT or [IPv6]:PORT");
    };
    let port = port.unwrap_or(netblast_spec::plan::DEFAULT_PORT);
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        if ip.is_ipv6() != v6 {
            anyhow::bail!(
                "{flag}: {host} is an {} address: give the {family} address or a name",
                if v6 { "IPv4" } else { "IPv6" }
            );
        }
    }
    let all = netblast_spec::plan::resolve_all(&format!("{}:{port}", bracket(host)), port)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let Some(a) = all.iter().find(|a| a.is_ipv6() == v6) else {
        let had: Vec<String> = all.iter().map(|a| a.ip().to_string()).collect();
        anyhow::bail!("{flag}: {host} has no {family} address (it has {})", had.join(", "));
    };
    Ok(a.to_string())
}

fn bracket(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') { format!("[{host}]") } else { host.to_string() }
}

/// `LO-HI` (or one port): the ports a serve's flows may take.
fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let (lo, hi) = s.split_once('-').unwrap_or((s, s));
    let port = |p: &str| {
        p.trim().parse::<u16>().ok().filter(|&p| p > 0).ok_or_else(|| format!("{p:?} is not a port (1-65535)"))
    };
    let (lo, hi) = (port(lo)?, port(hi)?);
    if lo > hi {
        return Err(format!("{lo}-{hi}: the first port is above the last"));
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn port_ranges_are_read_and_bad_ones_named() {
        assert_eq!(super::parse_port_range("5234-5237"), Ok((5234, 5237)));
        assert_eq!(super::parse_port_range("5234"), Ok((5234, 5234)));
        assert!(super::parse_port_range("5237-5234").unwrap_err().contains("above the last"));
        assert!(super::parse_port_range("0-3").unwrap_err().contains("not a port"));
        assert!(super::parse_port_range("a-b").unwrap_err().contains("\"a\""));
    }

    #[test]
    fn source_addresses_are_a_list_or_a_prefix() {
        let a = |s: &str| super::parse_sources(s).map(|v| v.0.iter().map(|a| a.to_string()).collect::<Vec<_>>());
        assert_eq!(a("10.1.0.2,10.1.0.3").unwrap(), ["10.1.0.2", "10.1.0.3"]);
        assert_eq!(a("10.1.0.0/30").unwrap(), ["10.1.0.1", "10.1.0.2"]);
        assert_eq!(a("10.1.0.2/31").unwrap(), ["10.1.0.2", "10.1.0.3"]);
        assert_eq!(a("fd00::1/127").unwrap(), ["fd00::", "fd00::1"]);
        assert_eq!(a("::1").unwrap(), ["::1"]);
        assert!(a("10.0.0.0/8").unwrap_err().contains("at most 1024"));
        assert!(a("10.1.0.2,::1").unwrap_err().contains("IPv4 and IPv6"));
        assert!(a("10.1.0.2,10.1.0.2").unwrap_err().contains("named twice"));
        assert!(a("host").unwrap_err().contains("not an IP address"));
    }
}
