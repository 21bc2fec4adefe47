//! msgrate over UDP: where the lost datagrams went, and whether the senders held the rate.

use super::{drops_words, pct, receiver_load};
use crate::profile::{Way, Workload};
use crate::result::{MsgTotals, RunResult};
use crate::units::{fmt_bytes, fmt_per_s};

/// UDP ways: how much was lost, how much of it the receiving sockets' full queues dropped (the
/// rest: the path's), and whether the senders held the rate asked.
pub fn udp(r: &RunResult) -> Vec<String> {
    let Workload::Msgrate(m) = &r.plan.profile.workload else { return Vec::new() };
    if m.protocol != crate::profile::Protocol::Udp {
        return Vec::new();
    }
    r.summary
        .ways
        .iter()
        .filter_map(|w| {
            let t: &MsgTotals = w.msgs.as_ref()?;
            let mut parts = Vec::new();
            let lost = t.lost.unwrap_or(0);
            if lost == 0 {
                parts.push(format!("no datagram lost of {}", t.sent));
            } else {
                // The kernel counts a drop per buffer: with GRO a buffer is a coalesced run of up
                // to `coalesced` datagrams, so the drops bound the queues' share from above.
                let drops = t.udp.and_then(|u| u.kernel_drops).unwrap_or(0);
                let coalesced = if m.gro { m.gro_coalesced() } else { 1 };
                let queue = drops.saturating_mul(coalesced).min(lost);
                let share = lost as f64 / t.sent.max(1) as f64;
                parts.push(format!("{lost} of {} datagrams lost ({})", t.sent, pct(share)));
                if queue > 0 {
                    let per =
                        t.udp.and_then(|u| u.rcvbuf).map(|b| format!(" of {} each", fmt_bytes(b))).unwrap_or_default();
                    let which = if coalesced > 1 {
                        format!(
                            "up to {queue} of them (GRO: {drops} coalesced buffers of up to {coalesced} datagrams) \
                             dropped"
                        )
                    } else {
                        format!("{queue} of them dropped")
                    };
                    parts.push(format!(
                        "{which} by the receiving sockets' full queues{per}: the receivers did not keep up (raise \
                         --rcvbuf and net.core.rmem_max, or --receivers per-cpu)"
                    ));
                }
                if lost > queue {
                    let path = lost - queue;
                    let drops = receiver_load(r, w.way).map(drops_words).filter(|d| !d.is_empty());
                    parts.push(match drops {
                        Some(d) => format!("{path} lost before the sockets: {d}"),
                        None => format!("{path} lost before the sockets, on the path (no counter here saw them)"),
                    });
                }
            }
            if let Some(b) = m.rate(w.way) {
                let wanted = b.bits_per_s() * w.streams.max(1) as f64 / 8.0 / m.msg_bytes.0.max(1) as f64;
                if t.sent_per_s < wanted * 0.95 {
                    let why = crate::diagnose::sender_cpu(r, w.way)
                        .map(|c| format!(": the sender's {c}"))
                        .unwrap_or_default();
                    parts.push(format!(
                        "the senders sent {} of the {} asked{why}",
                        fmt_per_s(t.sent_per_s),
                        fmt_per_s(wanted)
                    ));
                } else {
                    parts.push(format!("the senders held the rate asked ({})", fmt_per_s(wanted)));
                }
            }
            let way = if w.way == Way::Up { "client → server" } else { "server → client" };
            Some(format!("UDP {way}: {}", parts.join("; ")))
        })
        .collect()
}
