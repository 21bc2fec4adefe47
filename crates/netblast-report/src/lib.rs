//! netblast-report: everything a user reads is rendered here from a [`RunResult`].
//!
//! # Layout
//! - [`text`]: the human report (iperf3-like interval lines and summary).
//! - [`fleet`]: a fleet's frame log, rendered (what a coordinator that died leaves).
//! - [`json`]: the machine-readable document, and writing it to a file atomically.

#![warn(missing_docs)]

pub mod csv;
pub mod fleet;
pub mod hlog;
pub mod json;
pub mod text;

pub use netblast_spec::RunResult;
