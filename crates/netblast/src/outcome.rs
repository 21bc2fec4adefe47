//! How a command ended: an [`Outcome`] (exit 0, 1, 3, 4) or an [`AppError`] (exit 1 or 2).

use netblast_engine::exec::api::ClientError;

/// How a successful command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything ran to completion: exit 0.
    Complete,
    /// The run finished but is partial (errors, interrupted); the result says why: exit 1.
    Incomplete,
    /// A fleet finished without some of its agents (they failed or never came): exit 3.
    Partial,
    /// The run completed and an `--assert` failed: exit 4.
    AssertFailed,
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
pub struct AppError {
    /// 1: the run could not be done; 2: bad input (flags, profile).
    pub code: u8,
    /// The error chain, printed with `{:#}`.
    pub error: anyhow::Error,
}

impl AppError {
    /// Bad input: exit 2.
    pub fn input(error: impl Into<anyhow::Error>) -> AppError {
        AppError { code: 2, error: error.into() }
    }

    /// The run could not be done: exit 1.
    pub fn run(error: impl Into<anyhow::Error>) -> AppError {
        AppError { code: 1, error: error.into() }
    }

    /// A client error: bad input (exit 2) when it is the user's, else exit 1.
    pub fn client(e: ClientError) -> AppError {
        if e.is_input() { AppError::input(e) } else { AppError::run(e) }
    }
}
