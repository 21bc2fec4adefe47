//! What a test does at each step of the run sequence (`run::sequence`), whatever it aims at:
//! the [`Generator`] trait every kind's client end implements (the data-port client for every
//! stream kind, cps with no agent, HTTP), and what the sequence measured of the test's end
//! ([`Ending`]).

use crate::exec::api::{ClientError, Live};
use crate::exec::collect::Collector;
use crate::exec::start::Started;
use crate::exec::worker::StartGate;
use netblast_spec::result::{CpuUsage, HostInfo, HostLoad, RunResult, StreamInfo};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// One test's part in each step of the run sequence (`run::sequence`): made by its set-up, with its workers waiting
/// at [`Generator::gate`]; it collects its own messages (the [`Collector`] it is).
pub trait Generator: Collector + Sized {
    /// The least time between the end of set-up and the start instant.
    const LEAD: Duration;

    /// The gate the workers wait at.
    fn gate(&self) -> Arc<StartGate>;

    /// The test's id, as the result and the live view name it.
    fn test_id(&self) -> String;

    /// Once the start instant is known, before the wait (a data-port test starts reading the
    /// server's frames). An error abandons the test.
    fn before_start(&mut self) -> Result<(), ClientError> {
        Ok(())
    }

    /// What the live view shows at the start: the server (default when there is no agent on
    /// the other side) and the streams (none for HTTP).
    fn shown(&self) -> (&HostInfo, &[StreamInfo]);

    /// Right after the gate opened at `at` (a data-port test tells its server to start). An
    /// error abandons the test.
    fn at_start(&mut self, _at: Instant) -> Result<(), ClientError> {
        Ok(())
    }

    /// The test did not start: stop the workers at the gate, close what set-up opened.
    fn abandon(&mut self);

    /// Collecting is over: stop and join the workers and take what they sent meanwhile (each
    /// interval that releases to `live`).
    fn stop(&mut self, rx: &mpsc::Receiver<Self::Msg>, live: &mut dyn FnMut(Live<'_>));

    /// The result (its last intervals to `live`).
    fn result(self, started: &Started, end: Ending, live: &mut dyn FnMut(Live<'_>)) -> RunResult;
}

/// What the sequence measured of the test's end, for [`Generator::result`].
#[derive(Debug)]
pub struct Ending {
    /// This (collecting) thread's CPU time from the start to the end of collecting.
    pub cpu: CpuUsage,
    /// The host's load over the same span, where it can be read.
    pub load: Option<HostLoad>,
    /// When the user interrupted the run (seconds after the start), if they did.
    pub interrupted_at: Option<f64>,
}
