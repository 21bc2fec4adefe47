//! netblast: the command-line front end. It parses flags, wires the library crates together and
//! renders results; every behaviour lives in a library crate.
//!
//! # Layout
//! - [`cli`]: the clap definitions (flags and their help), and the requests they make.
//! - [`app`]: one function per subcommand, returning an [`app::Outcome`] or an [`app::AppError`]
//!   that carries the exit code (0 complete, 1 run failed or incomplete, 2 bad input, 3 a fleet
//!   without some of its agents, 4 an `--assert` failed).
//! - [`out`]: what a command writes: results, verdicts, live lines and the partial log.
//! - [`fleet`]: `netblast fleet` wired to the coordinator's runtime and live output.
//! - [`campaign`]: `netblast campaign`: a matrix of settings × repeats run cell by cell, each
//!   result kept as it ends, one summary made from the files.
//! - [`find_max`]: `run --find-max`: the search's steps run, one result with every step.
//! - [`outcome`]: how a command ended, and the exit code it maps to.
//! - [`signals`]: SIGINT/SIGTERM for runs, servers and coordinators.
//! - [`status`]: the live status line on a terminal.

#![warn(missing_docs)]

pub mod app;
pub mod campaign;
pub mod cli;
pub mod find_max;
pub mod fleet;
pub mod out;
pub mod outcome;
pub mod signals;
pub mod status;

pub use cli::Cli;
