//! netblast-spec: what a test is, what its result is, and how the two ends talk.
//!
//! This crate is plain data (serde, toml, hdrhistogram and small helpers; no tokio, hyper, aya
//! or socket2), so a viewer can read results without linking the traffic engine.
//!
//! # Layout
//! - [`profile`]: TOML profiles (`configs/*.toml`, embedded), one module per section, and
//!   their validation.
//! - [`plan`]: a profile and a target resolved into a plan; the streams of a plan.
//! - [`result`]: the versioned [`result::RunResult`] and the resolved [`result::Plan`].
//! - [`merge`]: results of concurrent tests merged into one, exactly.
//! - [`gather`]: releases each interval once every reporter has reported it.
//! - [`fleet`]: the messages between a fleet coordinator and its agents.
//! - [`hist`]: latency histograms: standard configuration, lossless codec, exact merging.
//! - [`wire`]: the data-port protocol (connection header, handshake, control frames).
//! - [`auth`]: the token, and the HMAC proofs and stream tags made from it.
//! - [`units`]: sizes, rates, durations, CPU lists, and their human renderings.
//! - [`error`]: [`SpecError`], the errors of loading and validating profiles.

#![warn(missing_docs)]

pub mod assert;
pub mod auth;
pub mod error;
pub mod fleet;
pub mod gather;
pub mod hist;
pub mod merge;
pub mod plan;
pub mod profile;
pub mod result;
pub mod units;
pub mod wire;

pub use error::SpecError;
pub use profile::Profile;
pub use result::RunResult;
