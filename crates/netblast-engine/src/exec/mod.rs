//! The floor every generator and the run sequence stand on: what a run takes and reports
//! ([`api`]: options, live events, errors, the result envelope), the wall clock and the start
//! instant ([`clock`]), what every worker shares ([`worker`]: pinned threads, the start
//! gate, the ticker, run flags, events, the worker context), what a test does at each step of
//! the run sequence ([`generator`]) and the loop it collects its workers' messages with
//! ([`collect`]). It imports only [`crate::os`].

pub mod api;
pub mod clock;
pub mod collect;
pub mod generator;
pub mod start;
pub mod worker;
