//! netblast-engine: the traffic engine.
//!
//! # Layout
//! - [`worker`]: what all generators share: pinned worker threads, start gate, interval
//!   ticker, run flags, the events workers send to the aggregator.
//! - [`bulk`]: TCP bulk streams (send / receive loops), used by both client and server.
//! - [`msgrate`]: small messages as fast as possible, one pinned flow per worker (TCP, UDP),
//!   or UDP datagrams paced at a bit rate.
//! - [`udpseq`]: sequenced UDP datagrams: the header, and loss, reordering, duplicates, jitter.
//! - [`rr`]: request/response round trips into HDR histograms (TCP, UDP; block or spin).
//! - [`http`]: HTTP/1.1, HTTP/2 and HTTPS floods (hyper, rustls), closed and open loop.
//! - [`meter`]: per-flow counters and interval events of the single-flow generators.
//! - [`end`]: one end of a test: connected streams to the right generator's workers.
//! - [`net`]: the raw socket calls of the hot paths (`send`, `sendmmsg`, `recvmmsg`, poll).
//! - [`sockopt`]: `[tcp]` socket options, applied the same way on both ends.
//! - [`runner`]: the entry point of a run of any kind.
//! - [`api`]: what a run takes and reports: options, live events, errors, the result envelope.
//! - [`client`]: a data-port test: connects to a `netblast serve`, runs the workers, gathers
//!   the server's view, and returns one [`netblast_spec::RunResult`].
//! - [`aggregate`]: turns worker events and server reports into intervals and a summary.
//! - [`clock`]: the wall clock and the common start instant.
//! - [`sys`]: affinity, CPU time, host facts, descriptor limits.
//! - [`doctor`]: what this host supports, one line per fact (`netblast doctor`).

#![warn(missing_docs)]

pub mod aggregate;
pub mod api;
pub mod bulk;
pub mod client;
pub mod clock;
pub mod cps;
pub mod doctor;
pub mod end;
pub mod http;
pub mod meter;
pub mod msgrate;
pub mod net;
pub mod rr;
pub mod runner;
pub mod sockopt;
pub mod sys;
pub mod udpseq;
pub mod worker;
