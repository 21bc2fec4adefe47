//! Errors of loading and validating profiles.

use std::path::PathBuf;

/// Why a profile could not be used; every variant names the file (or built-in profile) and,
/// where one is at fault, the field.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The profile file could not be read.
    #[error("cannot read profile {}: {error}", path.display())]
    Read {
        /// The file that was asked for.
        path: PathBuf,
        /// The I/O error (in the message, not chained: it would print twice).
        error: std::io::Error,
    },
    /// The TOML is malformed or has an unknown field or a value of the wrong type; the message
    /// carries the line, column and field from the TOML parser.
    #[error("{origin}: {message}")]
    Parse {
        /// File path or `built-in profile NAME`.
        origin: String,
        /// The parser's message (line, column, field).
        message: String,
    },
    /// A field holds a value that parses but is not allowed.
    #[error("{origin}: invalid {field}: {message}")]
    Invalid {
        /// File path or `built-in profile NAME`, or `command line`.
        origin: String,
        /// Dotted field path, e.g. `bulk.flows`.
        field: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A command-line flag that cannot be applied to the profile.
    #[error("{flag}: {message}")]
    Flag {
        /// The flag, e.g. `--wait`.
        flag: String,
        /// What is wrong.
        message: String,
    },
    /// `--profile NAME` named no built-in profile and no file.
    #[error("unknown profile {name:?}: not a file, and no built-in profile has that name (built-in: {available})")]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The built-in names, comma separated.
        available: String,
    },
}
