//! What every step of a merge shares: its error, where each input sits in the merged result,
//! and the adders of histograms (named inputs, so a mismatch names both) and of counts that
//! may be unknown.

use crate::hist::{self};
use crate::result::{RunResult, SCHEMA_V2};

/// Why results cannot be merged; every variant names the inputs at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MergeError {
    /// Nothing to merge.
    #[error("nothing to merge")]
    Empty,
    /// An input of another schema (a /1 result has no absolute start).
    #[error(
        "{input}: schema {schema} cannot be merged (needs {SCHEMA_V2} or later, which records when the run started; rerun with this netblast)"
    )]
    Schema {
        /// The input.
        input: String,
        /// Its schema.
        schema: String,
    },
    /// Two inputs of different kinds.
    #[error("{a} is a {a_kind} test and {b} a {b_kind} test: only results of one kind merge")]
    Kind {
        /// First input.
        a: String,
        /// Its kind.
        a_kind: String,
        /// Second input.
        b: String,
        /// Its kind.
        b_kind: String,
    },
    /// Two inputs with different reporting intervals.
    #[error("{a} reports every {a_ms} ms and {b} every {b_ms} ms: intervals cannot be aligned")]
    Interval {
        /// First input.
        a: String,
        /// Its interval.
        a_ms: f64,
        /// Second input.
        b: String,
        /// Its interval.
        b_ms: f64,
    },
    /// An input's start is not on the others' interval grid within the clock errors.
    #[error(
        "{input} started {residual_ms:.3} ms off the interval grid of {reference} (allowed: {allowed_ms:.3} ms from \
         their clock errors): its intervals cover other wall-clock spans; start runs with the same --start-at, or \
         let them start on the default boundary"
    )]
    Unaligned {
        /// The input.
        input: String,
        /// The input that sets the grid (the earliest start).
        reference: String,
        /// How far off, ms.
        residual_ms: f64,
        /// What the clock errors allow, ms.
        allowed_ms: f64,
    },
    /// A counter that would overflow, or a test given twice.
    #[error("{0}")]
    Sums(crate::sums::SumError),
    /// Two histograms that cannot be added.
    #[error("{what}: {a} and {b} cannot be added: {detail}")]
    Histogram {
        /// Which figure.
        what: String,
        /// First input (or `merged so far`).
        a: String,
        /// Second input.
        b: String,
        /// Why.
        detail: String,
    },
}

impl MergeError {
    /// The input to leave out for the rest to merge: the one named as the odd one (the later of
    /// two that disagree, the one off the grid, the one that overflows or repeats a test);
    /// `None` when no input is (nothing to merge).
    pub fn input(&self) -> Option<&str> {
        use crate::sums::SumError;
        match self {
            MergeError::Empty => None,
            MergeError::Schema { input, .. } | MergeError::Unaligned { input, .. } => Some(input),
            MergeError::Kind { b, .. } | MergeError::Interval { b, .. } | MergeError::Histogram { b, .. } => Some(b),
            MergeError::Sums(SumError::Overflow { input, .. }) => Some(input),
            MergeError::Sums(SumError::Twice { b, .. }) => Some(b),
        }
    }
}

/// One input: a name for messages (a file path, an agent address) and the result.
pub type Input<'a> = (&'a str, &'a RunResult);

/// Encoded histograms of the inputs being added (a [`hist::HistSum`]), with the name of the
/// inputs so far for error messages.
pub(crate) struct HistAcc<'a> {
    pub(crate) what: &'a str,
    pub(crate) h: hist::HistSum,
    pub(crate) from: String,
}

/// `Some(sum)` when every value is known.
pub(crate) fn sum_all(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.sum()
}

/// `Some(sum of the known)` when any value is known.
pub(crate) fn sum_any(v: impl Iterator<Item = Option<u64>>) -> Option<u64> {
    v.fold(None, |acc, x| match (acc, x) {
        (None, None) => None,
        (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
    })
}

/// Where input `j` sits in the merged result.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Place {
    /// Merged index of its interval 0.
    pub(crate) offset: u32,
    /// Its start, seconds after T0 (= offset × interval).
    pub(crate) shift_s: f64,
    /// Its stream ids are renumbered from here.
    pub(crate) first_stream: u32,
    /// Index of its first part in the merged parts.
    pub(crate) first_part: u32,
}
