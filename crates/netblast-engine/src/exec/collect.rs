//! The collect loop of the run sequence (`run::sequence`): after the start, one thread takes
//! what the workers (and, for a data-port test, the server) send, until the test's collector
//! says it has all it will get. Each interval a message completes is shown live as it is
//! released. Every generator is its own collector: the data-port test's is its aggregator with
//! the control connection (`run::client`), cps with no agent its aggregator alone
//! (`run::agentless`), the HTTP test's its workers' gatherer (`kinds::http`).

use crate::exec::api::Live;
use netblast_spec::result::Interval;
use std::sync::mpsc;
use std::time::Duration;

/// What a test does with the messages it collects.
pub trait Collector {
    /// What arrives on the channel.
    type Msg;

    /// Acts on the clock before each wait (a data-port test sends `stop` at the bound); how
    /// long to wait for the next message, or `None` when collecting is over.
    fn tick(&mut self) -> Option<Duration>;

    /// One message in; the intervals it completed, in order.
    fn take(&mut self, msg: Self::Msg) -> Vec<Interval>;

    /// Nothing arrived within the wait (`gone`: every sender is gone, nothing more will
    /// come); the intervals that completes. Returns `None` to stop collecting at once.
    fn idle(&mut self, gone: bool) -> Option<Vec<Interval>>;
}

/// Takes messages from `rx` into `c` until it is done, each released interval to `live`.
pub fn collect<C: Collector>(rx: &mpsc::Receiver<C::Msg>, c: &mut C, live: &mut dyn FnMut(Live<'_>)) {
    while let Some(wait) = c.tick() {
        let released = match rx.recv_timeout(wait) {
            Ok(msg) => c.take(msg),
            Err(e) => match c.idle(e == mpsc::RecvTimeoutError::Disconnected) {
                Some(v) => v,
                None => return,
            },
        };
        for iv in &released {
            live(Live::Interval(iv));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counts to `n` messages; each releases an interval; gone stops it.
    struct Upto {
        n: usize,
        got: usize,
        ticks: usize,
    }

    impl Collector for Upto {
        type Msg = u32;
        fn tick(&mut self) -> Option<Duration> {
            self.ticks += 1;
            (self.got < self.n).then_some(Duration::from_millis(20))
        }
        fn take(&mut self, msg: u32) -> Vec<Interval> {
            self.got += 1;
            vec![Interval { index: msg, start_s: 0.0, end_s: 1.0, streams: Vec::new(), sums: Vec::new(), http: None }]
        }
        fn idle(&mut self, gone: bool) -> Option<Vec<Interval>> {
            (!gone).then(Vec::new)
        }
    }

    #[test]
    fn collects_until_done_and_shows_each_interval() {
        let (tx, rx) = mpsc::channel();
        for i in 0..5 {
            tx.send(i).unwrap();
        }
        let mut c = Upto { n: 3, got: 0, ticks: 0 };
        let mut seen = Vec::new();
        collect(&rx, &mut c, &mut |l| {
            if let Live::Interval(iv) = l {
                seen.push(iv.index)
            }
        });
        assert_eq!(seen, [0, 1, 2], "done after three: the rest stay unread");
        assert_eq!(rx.try_recv(), Ok(3));
        // Every sender gone: the collector decides, here to stop.
        drop(tx);
        let mut c = Upto { n: 9, got: 0, ticks: 0 };
        collect(&rx, &mut c, &mut |_| {});
        assert_eq!((c.got, c.ticks), (1, 2), "the one left, then a wait that finds the channel closed");
    }
}
