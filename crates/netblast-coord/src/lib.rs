//! netblast-coord: the fleet coordinator. One profile on many agents (`netblast serve`
//! anywhere), started together on one clock, streamed back and merged exactly.
//!
//! The coordinator orchestrates one test; it never places machines (scale sets and
//! Kubernetes do). It reaches agents over the wire protocol only: it depends on `spec` and
//! `report`, never on the engine.
//!
//! # Layout
//! - [`agents`]: agent lists (`A,B`, `@file`, `dns:NAME`, `registered:GROUP:N`).
//! - [`pairing`]: which client agent tests against which server agent.
//! - [`session`]: one agent's session: connect or take a registration, hello, clock, frames.
//! - [`run`]: the fleet: connect, clock, order, stream and log, merge.

#![warn(missing_docs)]

pub mod agents;
pub mod pairing;
pub mod run;
pub mod session;

pub use run::{default_log_path, run, FleetConfig, FleetError, FleetEvent, FleetInterval};
