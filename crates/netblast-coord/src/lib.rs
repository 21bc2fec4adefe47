//! netblast-coord: the fleet coordinator. One profile on many agents (`netblast serve`
//! anywhere), started together on one clock, streamed back and merged exactly.
//!
//! The coordinator orchestrates one test; it never places machines (scale sets and
//! Kubernetes do). It reaches agents over the wire protocol only: it depends on `spec`, `wire`,
//! `report` and `metrics`, never on the engine.
//!
//! # Layout
//! - [`agents`]: agent lists (`A,B`, `@file`, `dns:NAME`, `registered:GROUP:N`).
//! - [`pairing`]: which client agent tests against which server agent.
//! - [`session`]: one agent's session: connect or take a registration, hello, clock, frames.
//! - [`config`]: a fleet's settings, errors, live events and bounds.
//! - [`roster`]: phases 1-2: agents connected, registered and clocked; the tests paired.
//! - [`collect`]: phases 3-5: orders at T0, frames collected and logged, the merged result.
//! - [`run`](mod@run): the fleet, phase by phase.
//! - [`live`]: what a fleet shows while it runs: lines for a person, Prometheus metrics.

#![warn(missing_docs)]

pub mod agents;
pub mod collect;
pub mod config;
pub mod live;
pub mod pairing;
pub mod roster;
pub mod run;
pub mod session;

pub use config::{FleetConfig, FleetError, FleetEvent, default_log_path};
pub use netblast_spec::fleet::FleetInterval;
pub use run::run;
