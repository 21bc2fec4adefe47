//! The `netblast` binary: parses the command line, sets up logging, calls the library, prints
//! the error chain once and maps the outcome to the exit status (0 complete, 1 run failed or
//! incomplete, 2 bad input, 3 a fleet without some of its agents, 4 an `--assert` failed).

use clap::Parser;
use netblast::app::{Outcome, dispatch};
use std::process::ExitCode;

fn main() -> ExitCode {
    netblast_engine::os::sys::set_allocator_release(release_mimalloc);
    let args: Vec<String> = std::env::args().collect();
    if let Some(hint) = netblast::cli::iperf3_hint(&args) {
        eprintln!("netblast: {hint}");
        return ExitCode::from(2);
    }
    let cli = netblast::Cli::parse_from(netblast::cli::iperf3_args(args));
    let filter =
        tracing_subscriber::EnvFilter::try_new(&cli.log).unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour only for a person at a terminal: a log redirected to a file or a pipe is read by
    // grep and tools, and NO_COLOR (no-color.org) turns it off everywhere.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(ansi)
        .init();
    match dispatch(cli) {
        Ok(Outcome::Complete) => ExitCode::SUCCESS,
        Ok(Outcome::Incomplete) => ExitCode::from(1),
        Ok(Outcome::Partial) => ExitCode::from(3),
        Ok(Outcome::AssertFailed) => ExitCode::from(4),
        Err(e) => {
            eprintln!("netblast: {:#}", e.error);
            ExitCode::from(e.code)
        }
    }
}

/// mimalloc for every allocation of the process: an HTTP/2 response costs a dozen small
/// allocations (header maps, HPACK strings, stream state), which glibc's allocator made a
/// sixth of the client's CPU time (`perf record` of `--http2 -c 4 -m 32` against nginx:
/// malloc, free and their helpers 19% of samples, 6% with mimalloc).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

unsafe extern "C" {
    /// mimalloc's own release (linked with the `mimalloc` crate): with `force`, frees what
    /// the calling thread's heap and abandoned heaps hold and returns free pages to the system.
    fn mi_collect(force: bool);
}

/// What an idle server calls to give memory back (`os::sys::release_free_memory`).
fn release_mimalloc() {
    // SAFETY: mi_collect only frees memory mimalloc holds unused.
    unsafe { mi_collect(true) }
}
