//! netblast-report: everything a user reads is rendered here from a [`RunResult`].
//!
//! # Layout
//! - [`text`]: the human report (iperf3-like interval lines and summary).
//! - [`campaign`]: a campaign's summary as text, CSV and one HTML page with error bars.
//! - [`fleet`]: a fleet's frame log, rendered (what a coordinator that died leaves).
//! - [`json`]: the machine-readable document, and writing it to a file atomically.
//! - [`csv`], [`hlog`], [`html`]: per-interval, per-stream and per-test rows, HdrHistogram
//!   interval logs, and one self-contained page with charts (or several runs compared).
//! - [`plots`] (each kind's charts as data), drawn by [`chart`]; [`sweep`] (an HTTP rate
//!   sweep's steps); [`search`] (a `--find-max` search's steps and answer); [`figures`]
//!   (figures the renderings share).

#![warn(missing_docs)]

pub mod campaign;
pub mod chart;
pub mod csv;
pub mod figures;
pub mod fleet;
pub mod hlog;
pub mod html;
pub mod json;
mod kinds;
pub mod limits;
mod lines;
mod markup;
pub mod plots;
pub mod probe;
pub mod search;
mod series;
pub mod sweep;
pub mod text;
pub mod verdict;

pub use netblast_spec::RunResult;
