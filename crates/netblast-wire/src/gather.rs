//! Gathering intervals from several reporters: interval `i` is complete once every reporter
//! has reported `i` (or something later) or is done. Every kind uses it: the client for its
//! workers and the server, `serve` for its workers, the HTTP client for its workers. Each
//! interval is released once, in order, complete.

use std::collections::BTreeMap;

/// Parts of intervals from `reporters` reporters, released in order once complete.
#[derive(Debug)]
pub struct Gather<T> {
    last: Vec<Option<u32>>,
    done: Vec<bool>,
    pending: BTreeMap<u32, T>,
}

impl<T: Default> Gather<T> {
    /// A gatherer for `reporters` reporters.
    pub fn new(reporters: usize) -> Gather<T> {
        Gather { last: vec![None; reporters], done: vec![false; reporters], pending: BTreeMap::new() }
    }

    /// The accumulator of interval `index`, noting that `reporter` reached it. A reporter out
    /// of range (a bug or a hostile peer's index) adds to the interval without moving progress.
    pub fn part(&mut self, reporter: usize, index: u32) -> &mut T {
        if let Some(l) = self.last.get_mut(reporter) {
            *l = Some(l.map_or(index, |x| x.max(index)));
        }
        self.pending.entry(index).or_default()
    }

    /// Notes that `reporter` will report nothing more.
    pub fn done(&mut self, reporter: usize) {
        if let Some(d) = self.done.get_mut(reporter) {
            *d = true;
        }
    }

    /// Whether every reporter is done.
    pub fn all_done(&self) -> bool {
        self.done.iter().all(|d| *d)
    }

    /// Whether `reporter` is done.
    pub fn is_done(&self, reporter: usize) -> bool {
        self.done.get(reporter).copied().unwrap_or(true)
    }

    /// Takes the intervals that are complete, in order.
    pub fn ready(&mut self) -> Vec<(u32, T)> {
        let mut out = Vec::new();
        while let Some((&i, _)) = self.pending.first_key_value() {
            // Each reporter sends one part per interval, so one that reported `i` (or later) is
            // finished with it.
            let complete = self.last.iter().zip(&self.done).all(|(l, d)| *d || l.is_some_and(|l| l >= i));
            if !complete {
                break;
            }
            let (i, t) = self.pending.pop_first().expect("first key exists");
            out.push((i, t));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_waits_for_every_reporter() {
        let mut g: Gather<Vec<u8>> = Gather::new(2);
        g.part(0, 0).push(1);
        assert!(g.ready().is_empty(), "reporter 1 has not reported 0");
        g.part(1, 0).push(2);
        let r = g.ready();
        assert_eq!(r, vec![(0, vec![1, 2])]);
        g.part(0, 1).push(3);
        g.done(1);
        assert_eq!(g.ready(), vec![(1, vec![3])], "a done reporter holds nothing up");
        assert!(!g.all_done());
        g.done(0);
        assert!(g.all_done());
    }

    #[test]
    fn intervals_come_out_in_order_once() {
        let mut g: Gather<u32> = Gather::new(1);
        *g.part(0, 1) += 1;
        *g.part(0, 0) += 1;
        assert_eq!(g.ready(), vec![(0, 1), (1, 1)]);
        assert!(g.ready().is_empty());
        *g.part(7, 2) += 5; // out-of-range reporter: counted, no progress
        assert!(g.ready().is_empty());
        g.done(0);
        assert_eq!(g.ready(), vec![(2, 5)]);
    }
}
