//! netblast-spec: what a test is and what its result is.
//!
//! This crate is plain data (serde, toml, hdrhistogram and small helpers; no tokio, hyper, aya,
//! socket2 or cryptography), so a viewer can read results without linking the traffic engine.
//! How the two ends talk (the wire protocol, its authentication) is `netblast-wire`.
//!
//! # Layout
//! - [`profile`]: TOML profiles (`configs/*.toml`, embedded), one module per section, and
//!   their validation.
//! - [`plan`]: a profile and a target resolved into a plan; the streams of a plan.
//! - [`result`]: the versioned [`result::RunResult`] and the resolved [`result::Plan`].
//! - [`campaign`]: a campaign file (a matrix of settings × repeats), its cells and runs' order,
//!   and its summary: medians and confidence intervals per cell, changes with theirs.
//! - [`merge`]: results of concurrent tests merged into one, exactly.
//! - [`diagnose`]: what limited a TCP flow (window, buffer, congestion, the application), and
//!   the fix.
//! - [`omit`]: `--omit`: a bulk test's first seconds left out of its totals.
//! - [`fleet`]: the messages between a fleet coordinator and its agents, and the frame log.
//! - [`hist`]: latency histograms: standard configuration, lossless codec, exact merging.
//! - [`units`]: sizes, rates, durations, CPU lists, and their human renderings.
//! - [`upgrade`]: results and log records of older schemas read as this build's.
//! - [`error`]: [`SpecError`], the errors of loading and validating profiles.
//! - [`bounded`]: lists and texts a peer sends, refused past their bounds while read.

#![warn(missing_docs)]

pub mod assert;
pub mod bounded;
pub mod campaign;
pub mod diagnose;
pub mod error;
pub mod find_max;
pub mod fleet;
pub mod hist;
pub mod mark;
pub mod merge;
pub mod omit;
pub mod plan;
pub mod profile;
pub mod result;
pub mod stats;
pub mod sums;
pub mod units;
pub mod upgrade;

pub use error::SpecError;
pub use profile::Profile;
pub use result::RunResult;
