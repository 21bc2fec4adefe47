//! Shared pieces of the self-validation benches; the servers, profile runs and namespace
//! pairs are the test kit's (`netblast-testkit`, which the integration tests use too).

#![warn(missing_docs)]

pub mod anchor;
pub mod baseline;
pub mod fleet_sim;
pub mod truth;

pub use netblast_testkit::{KillOnDrop, LocalServer, Nginx, ServerIn, netns, profile, run, run_with};

/// Prints one figure as one line (name, value, unit, what it means) and keeps it.
pub fn figure(name: &str, value: f64, unit: &str, note: &str) {
    truth::figure(name, value, unit, note);
}

/// How long each bench run lasts: `NETBLAST_BENCH_SECS` (default 3).
pub fn secs() -> std::time::Duration {
    let s: f64 = std::env::var("NETBLAST_BENCH_SECS").ok().and_then(|v| v.parse().ok()).unwrap_or(3.0);
    std::time::Duration::from_secs_f64(s)
}
