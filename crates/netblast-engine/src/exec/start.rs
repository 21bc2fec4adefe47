//! How every test starts and what it keeps of its start, for the run sequence (`run::sequence`)
//! whatever the test aims at: the start instant, a last step before it (the data-port test's
//! control reader), the wait, the gate opened, and this
//! thread's CPU time and the host's counters from then on; at the end, the result's envelope.

use crate::exec::api::{ClientError, Envelope, start_instant};
use crate::exec::clock;
use crate::exec::worker::StartGate;
use crate::os::host::HostMark;
use crate::os::sys::CpuMark;
use netblast_spec::result::{ClockInfo, CpuUsage, HostInfo, HostLoad, Plan, ProbeInfo};
use std::time::{Duration, Instant};

/// A test that started.
#[derive(Debug)]
pub struct Started {
    /// The start instant (UTC ns): the plan's, or the next interval boundary.
    pub start_unix_ns: u64,
    /// When the gate opened (UTC ns).
    pub actual_start_unix_ns: u64,
    /// The start instant on the monotonic clock.
    pub at: Instant,
    cpu_mark: CpuMark,
    host_mark: Option<HostMark>,
}

/// Starts a test whose workers wait at `gate`: the start instant (`lead` after now at the
/// earliest), `before` run once it is known, the wait, the gate opened. An error (no usable
/// start instant, or `before`'s) is returned with the gate still shut: the caller cancels it.
pub fn begin(
    plan: &Plan,
    lead: Duration,
    gate: &StartGate,
    before: impl FnOnce() -> Result<(), ClientError>,
) -> Result<Started, ClientError> {
    let (start_unix_ns, at) = start_instant(plan, lead)?;
    before()?;
    let cpu_mark = CpuMark::thread();
    clock::sleep_until(at);
    let cpu_mark = cpu_mark.wall_from(at);
    let host_mark = HostMark::read();
    let actual_start_unix_ns = clock::now_unix_ns();
    gate.open(at);
    Ok(Started { start_unix_ns, actual_start_unix_ns, at, cpu_mark, host_mark })
}

impl Started {
    /// Seconds since the start.
    pub fn elapsed_s(&self) -> f64 {
        Instant::now().saturating_duration_since(self.at).as_secs_f64()
    }

    /// This thread's CPU time since the start.
    pub fn thread_cpu(&self) -> CpuUsage {
        self.cpu_mark.usage()
    }

    /// The host's load since the start, where it can be read.
    pub fn host_load(&self) -> Option<HostLoad> {
        self.host_mark.as_ref().and_then(HostMark::load)
    }

    /// The result's envelope: the test, its start, and who and what measured it.
    pub fn envelope(
        &self,
        test_id: String,
        clock: ClockInfo,
        local_address: String,
        server: Option<HostInfo>,
        probe: ProbeInfo,
        server_probe: Option<ProbeInfo>,
    ) -> Envelope {
        Envelope {
            test_id,
            start_unix_ns: self.start_unix_ns,
            actual_start_unix_ns: self.actual_start_unix_ns,
            clock,
            local_address,
            server,
            probe,
            server_probe,
        }
    }
}
