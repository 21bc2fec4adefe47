//! netblast: the command-line front end. It parses flags, wires the library crates together and
//! renders results; every behaviour lives in a library crate.
//!
//! # Layout
//! - [`cli`]: the clap definitions (flags and their help).
//! - [`app`]: one function per subcommand, returning an [`app::Outcome`] or an [`app::AppError`]
//!   that carries the exit code (0 complete, 1 run failed or incomplete, 2 bad input).

#![warn(missing_docs)]

pub mod app;
pub mod cli;
pub mod status;

pub use cli::Cli;
