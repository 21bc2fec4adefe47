//! netblast-report: everything a user reads is rendered here from a [`RunResult`].
//!
//! # Layout
//! - [`text`]: the human report (iperf3-like interval lines and summary).
//! - [`fleet`]: a fleet's frame log, rendered (what a coordinator that died leaves).
//! - [`json`]: the machine-readable document, and writing it to a file atomically.
//! - [`csv`], [`hlog`], [`html`]: per-interval rows, HdrHistogram interval logs, and one
//!   self-contained page with charts (and a comparison with a base run).

#![warn(missing_docs)]

pub mod csv;
pub mod fleet;
pub mod hlog;
pub mod html;
pub mod json;
pub mod text;

pub use netblast_spec::RunResult;
