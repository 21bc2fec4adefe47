//! The workload: which kind of test a profile runs, with that kind's section. What depends on
//! the kind is the section's to say ([`Section`], implemented in each kind's file); the
//! methods here delegate to it, so no other code works it out again from a kind.
//!
//! This file is the profile's one list of the kinds (`kinds!`): their names ([`Kind`]), their
//! sections ([`Workload`], read and written under their names in a profile file) and their own
//! flags ([`KindFlags`]). Adding a kind is its file beside this one (its section, its flags,
//! its `FACTS` and its [`Section`]), declared in `profile/mod.rs`, and one line in `kinds!`.

use super::flags::SharedFlags;
pub use super::section::FieldError;
use super::section::Section;
use super::{BulkSection, CpsSection, HttpSection, MsgrateSection, Protocol, RrSection, RunSection, Way};
use crate::error::SpecError;
use crate::units::CpuList;
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize};
use std::time::Duration;

/// The profile's one list of kinds: each kind's line names its variant, its module (whose name
/// is the kind's in profiles and results), its section and its own flags, and the macro below
/// makes of them [`Kind`], [`Workload`], [`KindFlags`] and every match between them.
macro_rules! kinds {
    ($($(#[doc = $doc:literal])+ $v:ident($m:ident): $section:ty, $flags:ty;)+) => {
        /// The test kinds netblast runs.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum Kind {
            $($(#[doc = $doc])+ $v,)+
        }

        impl Kind {
            /// Every kind, in the order `netblast profiles` and the docs list them.
            pub const ALL: [Kind; [$(Kind::$v),+].len()] = [$(Kind::$v),+];

            /// The kind's name as written in profiles.
            pub fn name(self) -> &'static str {
                match self {
                    $(Kind::$v => stringify!($m),)+
                }
            }

            /// What is true of every test of the kind (its file's `FACTS`).
            fn facts(self) -> &'static super::section::KindFacts {
                match self {
                    $(Kind::$v => &super::$m::FACTS,)+
                }
            }
        }

        /// A test's kind and its parameters (the section named after the kind).
        #[derive(Debug, Clone, PartialEq)]
        pub enum Workload {
            $($(#[doc = $doc])+ $v($section),)+
        }

        impl Workload {
            /// The kind's section, through which everything that depends on the kind is asked.
            pub fn section(&self) -> &dyn Section {
                match self {
                    $(Workload::$v(x) => x.as_section(),)+
                }
            }

            /// The kind's section, to change.
            pub fn section_mut(&mut self) -> &mut dyn Section {
                match self {
                    $(Workload::$v(x) => x.as_section_mut(),)+
                }
            }

            /// The section of `kind` as a profile file (or a result, or the wire) holds it under
            /// the kind's name; `None` where it is written as null.
            pub(super) fn read_section<'de, D: Deserializer<'de>>(kind: Kind, d: D) -> Result<Option<Workload>, D::Error> {
                Ok(match kind {
                    $(Kind::$v => Option::<$section>::deserialize(d)?.map(Workload::$v),)+
                })
            }

            /// Writes the section into `map` under the kind's name.
            pub(super) fn write_section<M: SerializeMap>(&self, map: &mut M) -> Result<(), M::Error> {
                let name = self.kind().name();
                match self {
                    $(Workload::$v(x) => map.serialize_entry(name, x),)+
                }
            }

            /// The kind's workload with every parameter at its default.
            pub fn default_for(kind: Kind) -> Workload {
                match kind {
                    $(Kind::$v => Workload::$v(<$section>::default()),)+
                }
            }
        }

        /// Each kind's own flags, defined in its file beside its section (`CpsFlags` in
        /// `cps.rs`, which also applies them); the command line flattens them all.
        #[derive(Debug, Clone, Default, PartialEq)]
        #[cfg_attr(feature = "clap", derive(clap::Args))]
        pub struct KindFlags {
            $(
                #[doc = concat!(stringify!($m), "'s own flags.")]
                #[cfg_attr(feature = "clap", command(flatten))]
                pub $m: $flags,
            )+
        }

        impl KindFlags {
            /// The flags that are set, each with the kind that takes it.
            pub(super) fn set(&self) -> Vec<(&'static str, Kind)> {
                let own = [$((self.$m.set(), Kind::$v)),+];
                own.into_iter().flat_map(|(flags, kind)| flags.into_iter().map(move |f| (f, kind))).collect()
            }

            /// Applies the flags of `w`'s kind (and the shared ones it takes) to its section.
            pub(super) fn apply(&self, w: &mut Workload, shared: &SharedFlags, run: &mut RunSection) -> Result<(), SpecError> {
                match w {
                    $(Workload::$v(x) => x.apply(&self.$m, shared, run),)+
                }
            }
        }
    };
}

kinds! {
    /// TCP bulk streams, like iperf3.
    Bulk(bulk): super::bulk::BulkSection, super::bulk::BulkFlags;
    /// Small messages as fast as possible, one flow per pinned CPU (qperf tcp_bw -m 1).
    Msgrate(msgrate): super::msgrate::MsgrateSection, super::msgrate::MsgrateFlags;
    /// Request/response round trips (qperf tcp_lat, netperf TCP_RR).
    Rr(rr): super::rr::RrSection, super::rr::RrFlags;
    /// New TCP connections per second, one flow per pinned CPU (netperf TCP_CRR, ethr -t c).
    Cps(cps): super::cps::CpsSection, super::cps::CpsFlags;
    /// Concurrent TCP connections held and probed (RFC 9411's connection capacity).
    Hold(hold): super::hold::HoldSection, super::hold::HoldFlags;
    /// HTTP/1.1, HTTP/2, HTTPS request floods (hey, wrk, wrk2, vegeta).
    Http(http): Box<super::http::HttpSection>, super::http::HttpFlags;
}

/// A section as the trait object every kind-dependent question is asked of (a boxed one too:
/// a method call reaches the section through the box).
trait AsSection {
    fn as_section(&self) -> &dyn Section;
    fn as_section_mut(&mut self) -> &mut dyn Section;
}

impl<T: Section> AsSection for T {
    fn as_section(&self) -> &dyn Section {
        self
    }
    fn as_section_mut(&mut self) -> &mut dyn Section {
        self
    }
}

impl Kind {
    /// What the kind's streams count, in reports: messages, transactions, connections or
    /// responses (bulk: messages, never counted).
    pub fn unit(self) -> &'static str {
        self.facts().unit
    }

    /// Whether `--omit` (leaving the first seconds out of the totals, iperf3 -O) applies: to a
    /// flow that runs as fast as TCP goes, whose start is slow start.
    pub fn takes_omit(self) -> bool {
        self.facts().takes_omit
    }

    /// The figure a fleet's tests of this kind are ranked by.
    pub fn headline(self) -> Headline {
        self.facts().headline
    }
}

/// A kind's headline figure ([`Kind::headline`]), by which a fleet's tests are ranked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Headline {
    /// Bits per second received (sent where no receiver reported).
    BitsReceived,
    /// What the streams count (messages, transactions, connections) sent per second.
    OpsSent,
    /// HTTP responses per second.
    Responses,
}

impl Workload {
    /// The flow count a fleet divides among servers (`--pairing spread`): flows, an http
    /// test's connections; `None` for msgrate and cps without a count (one flow per CPU).
    pub fn flow_count_mut(&mut self) -> Option<&mut u32> {
        self.section_mut().flow_count_mut()
    }

    /// Scales what the workload counts in total (not per flow) to a test that runs flows
    /// `[from, to)` of `total`: a cps or http rate (and an http ramp's and steps' rates), a bulk
    /// byte count, an http request count. Per-flow figures (a UDP bitrate) stay as they are;
    /// integer counts are split cumulatively, so the parts add up exactly.
    pub fn share_totals(&mut self, from: u64, to: u64, total: u64) {
        let part_of = |amount: u64| {
            let at = |k: u64| (amount as u128 * k as u128 / total.max(1) as u128) as u64;
            at(to) - at(from)
        };
        let f = (to - from) as f64 / total.max(1) as f64;
        self.section_mut().share_totals(f, &part_of);
    }

    /// The kind.
    pub fn kind(&self) -> Kind {
        self.section().kind()
    }

    /// Whether it aims at URLs on any web server, not at `netblast serve`'s data port (no
    /// streams; [`Section::aims_at_urls`]).
    pub fn aims_at_urls(&self) -> bool {
        self.section().aims_at_urls()
    }

    /// Whether the test's flows are UDP.
    pub fn uses_udp(&self) -> bool {
        self.protocol() == Protocol::Udp
    }

    /// The transport of the test's flows.
    pub fn protocol(&self) -> Protocol {
        self.section().protocol()
    }

    /// Whether the streams count messages (msgrate, rr, cps).
    pub fn counts_msgs(&self) -> bool {
        self.section().counts_msgs()
    }

    /// The ways bytes go (none for http, which has no streams).
    pub fn ways(&self) -> &'static [Way] {
        self.section().ways()
    }

    /// Streams of a test on `cpus` client CPUs.
    pub fn stream_count(&self, cpus: usize) -> usize {
        self.section().stream_count(cpus)
    }

    /// Whether, without a flow count, the test runs one flow per CPU (msgrate, cps).
    pub fn flows_per_cpu(&self) -> bool {
        self.section().flows_per_cpu()
    }

    /// What its streams count, in reports (messages, datagrams, transactions, connections,
    /// responses).
    pub fn unit(&self) -> &'static str {
        self.section().unit()
    }

    /// Whether each flow busy-polls, a thread taking a whole CPU at each end (rr's `wait =
    /// "spin"`).
    pub fn spins(&self) -> bool {
        self.section().spins()
    }

    /// Whether the server receives on one socket per server CPU sharing a port, not one per
    /// flow (UDP msgrate's `receivers = "per_cpu"`).
    pub fn per_cpu_receivers(&self) -> bool {
        self.section().per_cpu_receivers()
    }

    /// Whether each stream has a worker of its own (message kinds), rather than streams being
    /// spread over one worker per CPU (bulk).
    pub fn worker_per_stream(&self) -> bool {
        self.counts_msgs()
    }

    /// The server CPUs the profile asks for, `None` when it does not say.
    pub fn server_cpus(&self) -> Option<&CpuList> {
        self.section().server_cpus()
    }

    /// Whether each flow's server end is pinned: always for the message kinds, for bulk when
    /// the profile names server CPUs.
    pub fn pins_server(&self) -> bool {
        self.section().pins_server()
    }

    /// TCP_NODELAY when the profile does not say: on for rr and cps (a latency test must not
    /// wait for Nagle), off for bulk and msgrate (as iperf3 and qperf).
    pub fn nodelay_default(&self) -> bool {
        self.section().nodelay_default()
    }

    /// The time bound in effect: `run.duration`, the length of http steps, or
    /// [`super::COUNT_ONLY_TIME_CAP`] when only a count bounds the test.
    pub fn time_bound(&self, run: &RunSection) -> Duration {
        if let Some(d) = run.duration {
            // The omitted start runs before the test's own duration (iperf3 -O).
            return d.get() + run.omit();
        }
        self.section().own_duration().unwrap_or(super::COUNT_ONLY_TIME_CAP)
    }

    /// One line saying what the test does, made from its parameters (the description of a
    /// profile changed by flags).
    pub fn describe(&self, run: &RunSection) -> String {
        let bound = match (run.duration, self.section().own_duration()) {
            (Some(d), _) => format!("{d}"),
            (None, Some(d)) => format!("{} in all", crate::units::Dur(d)),
            (None, None) => "count-bound".to_string(),
        };
        self.section().describe(&bound)
    }

    /// Checks the kind's parameters and that the test is bounded; errors are (field, message).
    pub fn check(&self, run: &RunSection) -> Result<(), FieldError> {
        let s = self.section();
        s.check()?;
        if run.duration.is_none() && !s.count_bound() {
            return Err(("run.duration", format!("a test needs a bound: {}", s.bound_hint())));
        }
        Ok(())
    }

    /// The bulk parameters, when this is a bulk test.
    pub fn bulk_mut(&mut self) -> Option<&mut BulkSection> {
        match self {
            Workload::Bulk(b) => Some(b),
            _ => None,
        }
    }

    /// The msgrate parameters, when this is a msgrate test.
    pub fn msgrate_mut(&mut self) -> Option<&mut MsgrateSection> {
        match self {
            Workload::Msgrate(m) => Some(m),
            _ => None,
        }
    }

    /// The rr parameters, when this is an rr test.
    pub fn rr_mut(&mut self) -> Option<&mut RrSection> {
        match self {
            Workload::Rr(r) => Some(r),
            _ => None,
        }
    }

    /// The cps parameters, when this is a cps test.
    pub fn cps_mut(&mut self) -> Option<&mut CpsSection> {
        match self {
            Workload::Cps(c) => Some(c),
            _ => None,
        }
    }

    /// The constant open-loop rate in operations per second (an http, cps or rr test's
    /// `rate`), when one is set: what `--rate` sets.
    pub fn rate(&self) -> Option<f64> {
        self.section().open_loop_rate()
    }

    /// The cps parameters, when this is a cps test.
    pub fn cps(&self) -> Option<&CpsSection> {
        match self {
            Workload::Cps(c) => Some(c),
            _ => None,
        }
    }

    /// Whether the other side is any listener, not a `netblast serve` (cps with no agent).
    pub fn agentless(&self) -> bool {
        self.cps().is_some_and(|c| !c.agent)
    }

    /// The http parameters, when this is an http test.
    pub fn http(&self) -> Option<&HttpSection> {
        match self {
            Workload::Http(h) => Some(h),
            _ => None,
        }
    }

    /// The http parameters, when this is an http test.
    pub fn http_mut(&mut self) -> Option<&mut HttpSection> {
        match self {
            Workload::Http(h) => Some(h),
            _ => None,
        }
    }
}
