//! Signals: a run stops gracefully on the first SIGINT/SIGTERM and aborts on the second; a
//! server or coordinator stops on either.

use netblast_engine::exec::worker::RunFlags;
use std::sync::Arc;

/// Installs SIGINT/SIGTERM handling for a run: the first signal stops gracefully (the result is
/// kept and marked incomplete), the second aborts.
pub fn watch_signals(flags: Arc<RunFlags>) -> Option<signal_hook::iterator::Handle> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM]).ok()?;
    let handle = signals.handle();
    std::thread::Builder::new()
        .name("netblast-sig".into())
        .spawn(move || {
            for _ in signals.forever() {
                if flags.stopping() {
                    eprintln!("netblast: aborting");
                    flags.abort();
                } else {
                    eprintln!("netblast: interrupted; stopping and keeping what was measured (again to abort)");
                    flags.interrupt();
                }
            }
        })
        .ok()?;
    Some(handle)
}

/// Completes on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
