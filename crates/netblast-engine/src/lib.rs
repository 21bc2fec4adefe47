//! netblast-engine: the traffic engine.
//!
//! # Layout
//! - [`worker`]: what all generators share: pinned worker threads, start gate, interval
//!   ticker, run flags, the events workers send to the aggregator.
//! - [`bulk`]: TCP bulk streams (send / receive loops), used by both client and server.
//! - [`sockopt`]: `[tcp]` socket options, applied the same way on both ends.
//! - [`client`]: `netblast run`: connects to a `netblast serve`, runs the workers, gathers the
//!   server's view, and returns one [`netblast_spec::RunResult`].
//! - [`aggregate`]: turns worker events and server reports into intervals and a summary.
//! - [`sys`]: affinity, CPU time, host facts, descriptor limits.

pub mod aggregate;
pub mod bulk;
pub mod client;
pub mod sockopt;
pub mod sys;
pub mod worker;
