//! What each kind's section answers for itself: one trait, implemented once per kind in the
//! kind's own file (`bulk.rs`, `msgrate.rs`, `rr.rs`, `cps.rs`, `http.rs`), so everything
//! that depends on the kind (its sentence, its checks, its streams and ways, transport, bounds,
//! defaults) is written next to its fields. [`super::Workload`] only delegates.

use super::{Kind, Protocol, Way};
use crate::units::CpuList;
use std::time::Duration;

/// Which of a server agent's ports a test of a kind goes to ([`Section::server_port`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerPort {
    /// `netblast serve`'s data port.
    Data,
    /// Its HTTP responder (`serve --http`).
    Http,
    /// Its HTTPS responder (`serve --https`).
    Https,
}

/// A field at fault and what is wrong with it.
pub type FieldError = (&'static str, String);

/// A kind's section of a profile.
pub trait Section {
    /// Its kind.
    fn kind(&self) -> Kind;

    /// The flags of [`super::SharedFlags`] it takes (`--duration` aside, which every kind
    /// takes); any other of them given for it is an error naming the kinds that take it.
    fn shared_flags(&self) -> &'static [&'static str];

    /// One line saying what the test does, `bound` (how long it runs, in words) at its end.
    fn describe(&self, bound: &str) -> String;

    /// Checks the section's own fields; errors are (field, message).
    fn check(&self) -> Result<(), FieldError>;

    /// Whether the section bounds the test by a count of its own (bulk's bytes, http's
    /// requests or steps) when `run.duration` is not set.
    fn count_bound(&self) -> bool {
        false
    }

    /// What a test of this kind without a bound should set.
    fn bound_hint(&self) -> String {
        format!("a {} test needs run.duration", self.kind().name())
    }

    /// How long the test runs when the run sets no duration and the section has a length of
    /// its own (http steps).
    fn own_duration(&self) -> Option<Duration> {
        None
    }

    /// The ways its bytes go (none for http, which has no streams).
    fn ways(&self) -> &'static [Way];

    /// Streams of a test on `cpus` client CPUs.
    fn stream_count(&self, cpus: usize) -> usize;

    /// Whether, without a flow count, it runs one flow per CPU.
    fn flows_per_cpu(&self) -> bool {
        false
    }

    /// Whether the server receives its datagrams on one socket per server CPU sharing a port
    /// (UDP msgrate's `receivers = "per_cpu"`), not on a socket per flow.
    fn per_cpu_receivers(&self) -> bool {
        false
    }

    /// The flow count a fleet divides among servers (flows, an http test's connections);
    /// `None` without a count (one flow per CPU).
    fn flow_count_mut(&mut self) -> Option<&mut u32>;

    /// Scales what it counts in total (a rate, a byte or request count) to the flows `[from,
    /// to)` of `total`; `f` is their share and `part_of` splits an integer count cumulatively,
    /// so the parts add up exactly.
    fn share_totals(&mut self, _f: f64, _part_of: &dyn Fn(u64) -> u64) {}

    /// The server CPUs it asks for, `None` when it does not say.
    fn server_cpus(&self) -> Option<&CpuList> {
        None
    }

    /// Its transport.
    fn protocol(&self) -> Protocol {
        Protocol::Tcp
    }

    /// Whether its streams count messages (the message kinds), each with a worker of its own.
    fn counts_msgs(&self) -> bool {
        false
    }

    /// TCP_NODELAY when the profile does not say.
    fn nodelay_default(&self) -> bool {
        false
    }

    /// Whether each flow busy-polls, a thread taking a whole CPU at each end (rr's `wait =
    /// "spin"`): a server counts them against its CPUs, a plan on one host warns of them.
    fn spins(&self) -> bool {
        false
    }

    /// Whether each flow's server end is pinned.
    fn pins_server(&self) -> bool {
        self.counts_msgs()
    }

    /// What its streams count, in reports: the kind's word ([`Kind::unit`]), or a word of
    /// its own (a UDP message is a datagram).
    fn unit(&self) -> &'static str {
        self.kind().unit()
    }

    /// What its latency is a latency of, in reports ("round-trip latency").
    fn latency_name(&self) -> &'static str {
        "latency"
    }

    /// What its latency samples are samples of, in reports' charts: what its streams count
    /// ([`Kind::unit`]), or where that differs, its own words (hold's connections opened).
    fn latency_samples(&self) -> &'static str {
        self.kind().unit()
    }

    /// What its lost count counts, in reports ("connections failed").
    fn lost_name(&self) -> &'static str {
        "messages lost"
    }

    /// Whether each flow's operations are connections of their own (cps), to a listener the
    /// server opens for the flow and names the port of on the flow's stream, which then carries
    /// no test data.
    fn own_listener(&self) -> bool {
        false
    }

    /// Connections the server end keeps open at once besides the streams and their listeners
    /// (a hold test's held connections): descriptors a server agent must have free for it.
    fn server_held_conns(&self) -> u64 {
        0
    }

    /// Whether a flow's sending end counts what it lost itself (an rr request over UDP left
    /// without an answer, a cps connection that failed), where a receiver would count by
    /// sequence numbers.
    fn sender_counts_lost(&self) -> bool {
        false
    }

    /// Whether what its streams count as sent includes what was lost (a datagram sent and
    /// lost does; a cps connection that failed was never completed, and is counted apart), so
    /// that the lost share is lost over sent (otherwise over sent and lost).
    fn sent_counts_lost(&self) -> bool {
        true
    }

    /// The hosts and ports its connections go to, from the run's target (`HOST` or
    /// `HOST:PORT`): the target at `data_port` (netblast's), or an HTTP test's URLs'
    /// authorities (a path alone goes to the target). What an agent checks against the
    /// addresses it may reach.
    fn dial_targets(&self, target: &str, data_port: u16) -> Vec<(String, u16)> {
        vec![(target.to_string(), data_port)]
    }

    /// The rate each sending flow going `way` was asked to hold, bits/s (bulk's `-b`): a flow
    /// held there is paced, not limited by its path.
    fn asked_bits_per_s(&self, _way: Way) -> Option<f64> {
        None
    }

    /// The bytes one operation carries where a rate is asked in bits/s (a msgrate message, a
    /// bulk block): a find-max step at a bit rate counts its samples in these operations.
    fn op_bytes(&self) -> Option<u64> {
        None
    }

    /// Whether its receiver counts what was lost by sequence numbers (datagrams of a UDP
    /// message stream), where [`Self::sender_counts_lost`] counts it at the sender.
    fn receiver_counts_lost(&self) -> bool {
        false
    }

    /// Whether it aims at URLs on any web server (an HTTP test), not at `netblast serve`'s
    /// data port: it has no streams, an agent's data port refuses it, a fleet of it needs no
    /// server agents, and a URL is its target.
    fn aims_at_urls(&self) -> bool {
        false
    }

    /// The port a target given without one is reached at, `data_port` being `netblast
    /// serve`'s (a web server's for HTTP and for cps with no agent).
    fn target_port(&self, data_port: u16) -> u16 {
        data_port
    }

    /// Whether each flow goes as fast as TCP lets it (bulk): its rate is the path's, its
    /// buffers' or its CPU's, so each TCP way's limit is diagnosed, and a flow held below its
    /// pace was held by the path. A message, datagram or transaction sender goes at its own
    /// pace.
    fn tcp_sets_the_rate(&self) -> bool {
        false
    }

    /// What the `errors` assertion counts, in reports.
    fn errors_name(&self) -> &'static str {
        "errors"
    }

    /// Which port of a server agent a fleet's clients are sent to.
    fn server_port(&self) -> ServerPort {
        ServerPort::Data
    }

    /// A path on the host it runs on that it would read (`http.body_file`): the field, and where
    /// an order carries that content instead. An agent opens no path a peer names.
    fn host_path(&self) -> Option<(&'static str, &'static str)> {
        None
    }

    /// Reads each file it names into the section itself (`http.body_file` into `http.body`),
    /// for a profile that travels to agents.
    fn inline_host_files(&mut self) -> Result<(), String> {
        Ok(())
    }

    /// Whether its headline has a bit rate: a transaction's, a connection's or a TCP
    /// message's bytes are not what rr, cps and msgrate over TCP measure (their headline is
    /// counts and latency).
    fn headline_bits(&self) -> bool {
        true
    }

    /// The constant open-loop rate in operations per second, when one is set (what `--rate`
    /// sets; `None` for kinds without one).
    fn open_loop_rate(&self) -> Option<f64> {
        None
    }

    /// Why `--find-max` cannot search its rate, where it cannot: its `--rate` is not the load it
    /// offers (hold's only paces how its connections open), so a search would judge the wrong
    /// figure against it.
    fn unsearchable(&self) -> Option<&'static str> {
        None
    }

    /// What a test aimed at `target` is aimed at, in words, where that is not the peer's
    /// address: an http test's URLs, paths completed with the target.
    fn aimed_at(&self, _target: &str) -> Option<String> {
        None
    }

    /// The connections it keeps that are not streams (an http test's), as the report counts
    /// them in place of streams.
    fn connections_not_streams(&self) -> Option<u32> {
        None
    }

    /// The answers that count as succeeded, for kinds whose peer answers with a status (an http
    /// test's expected status set).
    fn expected_statuses(&self) -> Option<super::StatusSet> {
        None
    }

    /// The rate steps of a sweep, for kinds that sweep (an http test's `steps`); empty for none.
    fn rate_steps(&self) -> &[super::RateStep] {
        &[]
    }

    /// The protocol version it speaks, by name, for kinds with more than one (an http test's
    /// `http1`, `http2`).
    fn version_name(&self) -> Option<String> {
        None
    }
}

/// "s" unless one.
pub(crate) fn plural(n: u32) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// A flow count in words: `n flows`, or one per CPU without one.
pub(crate) fn flows_words(flows: Option<u32>) -> String {
    match flows {
        Some(f) => format!("{f} flow{}", plural(f)),
        None => "one flow per CPU".to_string(),
    }
}

/// Checks an optional flow count against 1..[`super::MAX_FLOWS`].
pub(crate) fn check_flows(field: &'static str, flows: Option<u32>) -> Result<(), FieldError> {
    match flows {
        Some(f) if f == 0 || f > super::MAX_FLOWS => Err((field, format!("{f} is outside 1..{}", super::MAX_FLOWS))),
        _ => Ok(()),
    }
}

/// What is true of every test of a kind, whatever its section says: each kind's file has its
/// `FACTS`.
#[derive(Debug)]
pub(crate) struct KindFacts {
    /// What the kind's streams count, in reports.
    pub unit: &'static str,
    /// Whether `--omit` applies.
    pub takes_omit: bool,
    /// The figure a fleet's tests of the kind are ranked by.
    pub headline: super::Headline,
}
