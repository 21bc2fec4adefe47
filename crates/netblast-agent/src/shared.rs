//! What every connection of one server shares, and the count of open connections.

use crate::config::{Access, AgentConfig, Held, Limits, ServeStats};
use crate::registry::Registry;
use netblast_probe::Probe;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

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
    /// The ports its per-flow sockets take (`serve --flow-ports`); `None`: the kernel's.
    pub flow_ports: netblast_engine::os::sockopt::FlowPorts,
    /// Fleet orders running now, over every coordinator's session.
    pub orders: Arc<AtomicUsize>,
    /// Connections that have not proven themselves yet.
    pub unproven: Arc<crate::unproven::Unproven>,
}

/// One running fleet order's place in [`Shared::orders`], given back on drop.
#[derive(Debug)]
pub(crate) struct OrderSlot(Arc<AtomicUsize>);

impl OrderSlot {
    /// Takes a place if fewer than `max` orders run; otherwise how many do.
    pub(crate) fn take(orders: &Arc<AtomicUsize>, max: usize) -> Result<OrderSlot, usize> {
        orders
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1))
            .map(|_| OrderSlot(orders.clone()))
    }
}

impl Drop for OrderSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn orders_are_counted_over_every_session_of_the_agent() {
        // Found in the audit: the 64-order cap was per session; one coordinator listing the
        // same agent 100 times ran 100 orders on it. The count is the agent's.
        let orders: Arc<AtomicUsize> = Default::default();
        let held: Vec<OrderSlot> = (0..64).map(|_| OrderSlot::take(&orders, 64).unwrap()).collect();
        assert_eq!(OrderSlot::take(&orders, 64).unwrap_err(), 64);
        drop(held);
        assert_eq!(orders.load(Ordering::Relaxed), 0);
        assert!(OrderSlot::take(&orders, 64).is_ok());
    }
}
