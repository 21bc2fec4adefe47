//! `--find-max`: the highest offered rate at which every `--assert` holds, found by a search of
//! runs (steps) at chosen rates, each judged on its own figures after a warm-up.
//!
//! The method (docs/metrics.md, "Finding the highest load"): a geometric climb from the low end
//! of the range, doubling, until the first step that does not hold; then bisection (at the
//! geometric midpoint) between the highest rate that held and the lowest that did not, until
//! they are within the resolution (5% by default); the highest rate that held is then run once
//! more, and the answer only when every run of it held. A rate holds when the generator kept
//! its schedule, the target took the offered rate (95% of it), and every threshold passed on
//! the step's figures less its warm-up. A step where netblast itself could not keep its
//! schedule (its CPU, its ports, its connections) is the generator's limit: the search stops
//! there and never reports it as the target's capacity.
//!
//! This module is the part with no runtime: the search ([`Search`]), a step's judgement
//! ([`judge`]) and what the result keeps ([`FindMax`]); the binary runs the steps.

mod drive;
mod judge;
mod search;

pub use crate::result::{Axis, Ending, FindMax, LimitedBy, Step, StepOutcome};
pub use drive::{Steps, bottom_failed};
pub use judge::{HELD, Judged, judge, step_seconds, window};
pub use search::Search;
