//! What the server says of a test: its workers' interval samples gathered into one frame, a
//! large test's way sums (cumulative kernel counters turned into deltas), and its line on
//! `serve`'s stderr.

use netblast_spec::profile::Way;
use netblast_wire::wire::{ServerSample, ServerWaySample, TestId, TestSetup};
use std::collections::HashMap;
use std::net::SocketAddr;

/// Way sums of a large test's interval reports: the kernel counters the server reads are
/// cumulative per stream, so the last value of each is kept to turn them into deltas.
#[derive(Default)]
pub(crate) struct WaySums {
    pub(crate) retrans: HashMap<u32, u64>,
    pub(crate) segs: HashMap<u32, u64>,
}

impl WaySums {
    pub(crate) fn sums(&mut self, streams: &[ServerSample], ways: &HashMap<u32, Way>) -> Vec<ServerWaySample> {
        let mut out: Vec<ServerWaySample> = Vec::new();
        for s in streams {
            let Some(&way) = ways.get(&s.id) else { continue };
            let i = match out.iter().position(|w| w.way == way) {
                Some(i) => i,
                None => {
                    out.push(ServerWaySample { way, bytes: 0, msgs: 0, retransmits: 0, segs_out: None });
                    out.len() - 1
                }
            };
            let w = &mut out[i];
            w.bytes += s.bytes;
            w.msgs += s.msgs;
            if let Some(t) = s.tcp {
                let delta = |m: &mut HashMap<u32, u64>, now: u64| now.saturating_sub(m.insert(s.id, now).unwrap_or(0));
                w.retransmits += delta(&mut self.retrans, t.retrans_segs);
                *w.segs_out.get_or_insert(0) += delta(&mut self.segs, t.segs_out);
            }
        }
        // Every way of the test is reported, with zeros where nothing moved.
        for way in ways.values() {
            if !out.iter().any(|w| w.way == *way) {
                out.push(ServerWaySample { way: *way, bytes: 0, msgs: 0, retransmits: 0, segs_out: None });
            }
        }
        out
    }
}

/// One interval of the server's workers, gathered into one frame.
#[derive(Default)]
pub(crate) struct ServerInterval {
    pub(crate) span: Option<(f64, f64)>,
    pub(crate) streams: Vec<ServerSample>,
}

/// What one test moved through this server, for its line on `serve`'s stderr.
#[derive(Debug, Default)]
pub(crate) struct TestTotals {
    pub(crate) streams: usize,
    pub(crate) received: u64,
    pub(crate) sent: u64,
    pub(crate) msgs_received: u64,
    pub(crate) msgs_sent: u64,
    pub(crate) seconds: f64,
}

impl TestTotals {
    /// `PEER KIND test ID, N streams: received … (rate), sent … (rate) in S s: ok|failed: why`.
    pub(crate) fn line(&self, peer: SocketAddr, test_id: &TestId, setup: &TestSetup, problem: Option<&str>) -> String {
        use netblast_spec::result::per_second;
        use netblast_spec::units::{fmt_bits_per_s, fmt_bytes, fmt_per_s};
        let mut parts = Vec::new();
        for (what, bytes, msgs) in
            [("received", self.received, self.msgs_received), ("sent", self.sent, self.msgs_sent)]
        {
            if bytes == 0 && msgs == 0 {
                continue;
            }
            let mut p = format!(
                "{what} {} ({})",
                fmt_bytes(bytes),
                fmt_bits_per_s(per_second(bytes as f64 * 8.0, self.seconds))
            );
            if msgs > 0 {
                let unit = setup.profile.kind().unit();
                p.push_str(&format!(", {msgs} {unit} ({})", fmt_per_s(per_second(msgs as f64, self.seconds))));
            }
            parts.push(p);
        }
        if parts.is_empty() {
            parts.push("nothing moved".into());
        }
        let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
        format!(
            "netblast serve: {peer} {} test {test_id}, {} stream{}: {} in {:.2} s: {}",
            setup.profile.kind().name(),
            self.streams,
            if self.streams == 1 { "" } else { "s" },
            parts.join(", "),
            self.seconds,
            match problem {
                None => "ok".to_string(),
                Some(p) => format!("failed: {p}"),
            }
        )
    }
}
