//! Fleet tests: `netblast fleet` over agents in network namespaces (root) and over agents on
//! loopback. A binary of their own, so nothing else runs beside them.

// Shared with the integration binary.
#[allow(dead_code)]
mod browser;
mod fleet;
mod fleet_hostile;
mod fleet_search;
// Shared with the integration binary; this one uses part of it.
#[allow(dead_code, unused_imports)]
mod util;
