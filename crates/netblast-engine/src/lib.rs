//! netblast-engine: the traffic engine, laid out by layer.
//!
//! # Layout
//! Five layers, each importing only those below it (`scripts/check-structure.py` checks it):
//! - [`run`]: a run from request to result: [`run::resolve`] (a profile, a target, a start and a
//!   binding resolved against this host into a plan) and [`run::run`] (any kind); the data-port
//!   [`run::client`].
//! - [`kinds`]: the generators, one module per kind, each run by both ends through
//!   [`kinds::spawn`]: [`kinds::bulk`] (TCP streams as fast as the kernel takes bytes),
//!   [`kinds::msgrate`] (small messages, or UDP datagrams paced at a bit rate), [`kinds::rr`]
//!   (request/response round trips), [`kinds::cps`] (new connections per second), and
//!   [`kinds::http`] (HTTP/1.1, HTTP/2 and HTTPS floods, client only); what every kind's flows are
//!   made of ([`kinds::flow`]).
//! - [`measure`]: per-flow counters of the single-flow generators ([`measure::meter`]), UDP
//!   sequence numbers and their accounting ([`measure::udpseq`]), and the aggregator that turns
//!   worker events and server reports into intervals and a summary ([`measure::aggregate`]).
//! - [`exec`]: what a run takes and reports ([`exec::api`]: options, live events, errors, the
//!   result envelope); the wall clock and start instant ([`exec::clock`]); what every worker
//!   shares ([`exec::worker`]: pinned threads, start gate, ticker, run flags, events, the worker
//!   context).
//! - [`os`]: the host: raw socket calls of the hot paths ([`os::net`]), `[tcp]` socket options
//!   and where sockets leave from ([`os::sockopt`]), affinity, CPU time, host facts, descriptor
//!   limits ([`os::sys`]), and what this host supports ([`os::doctor`]).

#![warn(missing_docs)]

pub mod exec;
pub mod kinds;
pub mod measure;
pub mod os;
pub mod run;
