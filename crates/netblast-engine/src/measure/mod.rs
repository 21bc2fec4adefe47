//! What the engine measures, beside what the generators count: per-flow counters and interval
//! events of the single-flow generators, the sequence numbers UDP datagrams carry and what the
//! receiver makes of them, and the aggregator of a run's events and reports.

pub mod aggregate;
pub mod meter;
pub mod udpseq;
