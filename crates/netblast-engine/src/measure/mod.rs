//! What the engine measures, beside what the generators count: per-flow counters and interval
//! events of the single-flow generators, the sequence numbers UDP datagrams carry and what the
//! receiver makes of them, the aggregator of a run's events and reports, and the one pacer of
//! the generators that pace in user space.

pub mod aggregate;
pub mod meter;
pub mod pace;
pub mod udpseq;
