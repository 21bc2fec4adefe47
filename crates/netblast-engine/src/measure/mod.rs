//! What the engine measures, beside what the generators count: per-flow counters and interval
//! events of the single-flow generators, and the aggregator of a run's events and reports.

pub mod aggregate;
pub mod meter;
