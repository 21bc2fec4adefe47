//! What every connection of one server shares, and the count of open connections.

use crate::config::{Access, AgentConfig, Held, Limits, ServeStats};
use crate::registry::Registry;
use netblast_probe::Probe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// What every connection of one server shares.
#[derive(Debug)]
pub struct Shared {
    /// Tests waiting for their streams.
    pub reg: Arc<Registry>,
    /// Source of TCP statistics.
    pub probe: Probe,
    /// Who may connect.
    pub access: Access,
    /// Counters of refusals.
    pub stats: Arc<ServeStats>,
    /// How this serve takes fleet orders.
    pub agent: AgentConfig,
    /// What a peer or test may take.
    pub limits: Limits,
    /// What the running tests hold.
    pub held: Held,
    /// The one interface this server's test sockets use (`serve --bind-dev`).
    pub bind_dev: Option<String>,
}

/// Connections open in this process, on every port `serve` listens on.
static OPEN_CONNECTIONS: AtomicUsize = AtomicUsize::new(0);

/// One open connection; when the last one closes the process gives back the memory its
/// allocator holds free (a flood of connections would otherwise stay in the RSS).
#[derive(Debug)]
pub(crate) struct OpenConnection(());

impl OpenConnection {
    pub(crate) fn new() -> Self {
        OPEN_CONNECTIONS.fetch_add(1, Ordering::Relaxed);
        OpenConnection(())
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        if OPEN_CONNECTIONS.fetch_sub(1, Ordering::AcqRel) == 1 {
            netblast_engine::os::sys::release_free_memory();
        }
    }
}
