//! `[bulk]`: TCP bulk streams (iperf3's test).

use super::Kind;
use super::RunSection;
use super::flags::{SharedFlags, flag_err, set};
use super::section::{FieldError, Section, check_flows, plural};
use crate::error::SpecError;
use crate::units::ByteSize;
use serde::{Deserialize, Serialize};

/// Which way the bytes of a bulk test flow.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Client sends, server receives (iperf3 default).
    #[default]
    Forward,
    /// Server sends, client receives (iperf3 `-R`).
    Reverse,
    /// Both at once, on separate connections (iperf3 `--bidir`).
    Bidir,
}

/// The way one connection carries bytes: from client to server or back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Way {
    /// Client to server.
    Up,
    /// Server to client.
    Down,
}

impl Way {
    /// Its name in reports and logs: `up` or `down` (as serialized).
    pub fn name(self) -> &'static str {
        match self {
            Way::Up => "up",
            Way::Down => "down",
        }
    }
}

impl Direction {
    /// The ways a test of this direction uses, in report order.
    pub fn ways(self) -> &'static [Way] {
        match self {
            Direction::Forward => &[Way::Up],
            Direction::Reverse => &[Way::Down],
            Direction::Bidir => &[Way::Up, Way::Down],
        }
    }
}

/// How the sender hands bytes to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
pub enum SendMode {
    /// `send()` from a user buffer (one copy into the kernel).
    #[default]
    #[cfg_attr(feature = "clap", value(skip))]
    Copy,
    /// `sendfile()` from an in-memory file: the kernel references page-cache pages, no copy
    /// from user space (what iperf3 `-Z` does).
    Sendfile,
    /// `send(MSG_ZEROCOPY)`: pages pinned and referenced; completions read from the error queue.
    /// On loopback the kernel copies anyway at delivery, so it does not help there.
    #[cfg_attr(feature = "clap", value(name = "msg"))]
    MsgZerocopy,
}

/// The `[bulk]` section.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BulkSection {
    /// Number of parallel flows (per direction).
    #[serde(default = "one")]
    pub flows: u32,
    /// forward, reverse or bidir.
    #[serde(default)]
    pub direction: Direction,
    /// Bytes handed to the kernel per send call (iperf3 `-l`).
    #[serde(default = "default_block")]
    pub block_bytes: ByteSize,
    /// How the sender hands bytes to the kernel (`copy`, `sendfile`, `msg_zerocopy`).
    #[serde(default)]
    pub send_mode: SendMode,
    /// Stop after this many bytes in total, split evenly over the sending flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<ByteSize>,
    /// Each sending flow held at this rate (iperf3 `-b` over TCP), by the kernel's pacing
    /// (`SO_MAX_PACING_RATE`: payload bytes per second); none: as fast as TCP goes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<crate::units::BitRate>,
    /// The server-to-client flows' rate when it differs (`-b UP/DOWN`); none: `bitrate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate_down: Option<crate::units::BitRate>,
    /// Server CPUs for the server's ends of the flows, flow i's on the i-th (wrapping), one
    /// pinned worker per CPU; none: the server's workers are not pinned (iperf3's default;
    /// its `-A n,m` pins both ends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpus: Option<crate::units::CpuList>,
}

fn one() -> u32 {
    1
}

fn default_block() -> ByteSize {
    ByteSize(BulkSection::DEFAULT_BLOCK)
}

impl BulkSection {
    /// Default send size: 2 MiB. Measured on the 2-core development VM (Linux 6.18, loopback,
    /// one flow): 128-512 KiB sends reach about 30 Gbit/s with the sender's CPU saturated,
    /// 768 KiB-1 MiB about 45, 2 MiB about 49, 4 MiB about 46 (iperf3's default 128 KiB: ~30;
    /// iperf3 -l 1M: ~44). Fewer, larger sends cost the sender fewer cycles per byte.
    pub const DEFAULT_BLOCK: u64 = 2 * 1024 * 1024;
}

impl Default for BulkSection {
    fn default() -> Self {
        BulkSection {
            flows: 1,
            direction: Direction::Forward,
            block_bytes: default_block(),
            send_mode: SendMode::Copy,
            bytes: None,
            bitrate: None,
            bitrate_down: None,
            server_cpus: None,
        }
    }
}

/// What is true of every bulk test: it counts bytes (its unit word, messages, is never shown),
/// its slow start is what `--omit` leaves out, and a fleet ranks it by bits per second received.
pub(crate) const FACTS: super::section::KindFacts =
    super::section::KindFacts { unit: "messages", takes_omit: true, headline: super::Headline::BitsReceived };

impl Section for BulkSection {
    fn kind(&self) -> Kind {
        Kind::Bulk
    }

    fn shared_flags(&self) -> &'static [&'static str] {
        &["--flows", "--reverse", "--bidir", "--block", "--bitrate", "--server-cpus", "-n"]
    }

    fn describe(&self, bound: &str) -> String {
        let dir = match self.direction {
            Direction::Forward => "client to server",
            Direction::Reverse => "server to client",
            Direction::Bidir => "both ways",
        };
        let bytes = self.bytes.map(|n| format!(", {n} in total")).unwrap_or_default();
        let paced = match (self.bitrate, self.rate(crate::profile::Way::Down)) {
            (up, down) if up != down => format!(
                ", paced to {} up and {} down",
                up.map_or("no limit".to_string(), |r| r.to_string()),
                down.map_or("no limit".to_string(), |r| r.to_string())
            ),
            (Some(r), _) => format!(", each paced to {r}"),
            _ => String::new(),
        };
        format!(
            "bulk: {} TCP flow{} {dir}, {} per send{bytes}{paced}, {bound}",
            self.flows,
            plural(self.flows),
            self.block_bytes
        )
    }

    fn check(&self) -> Result<(), FieldError> {
        check_flows("bulk.flows", Some(self.flows))?;
        if self.block_bytes.bytes() == 0 || self.block_bytes.bytes() > 64 << 20 {
            return Err(("bulk.block_bytes", format!("{} is outside 1..64MiB", self.block_bytes)));
        }
        if self.bytes.is_some_and(|n| n.bytes() == 0) {
            return Err(("bulk.bytes", "must be greater than 0".into()));
        }
        for (field, rate) in [("bulk.bitrate", self.bitrate), ("bulk.bitrate_down", self.bitrate_down)] {
            // The kernel takes bytes per second in 64 bits; below 8 bit/s it is 0.
            if let Some(r) = rate {
                if !(r.0.is_finite() && (8.0..=1e13).contains(&r.0)) {
                    return Err((field, format!("{r} is outside 8 bit/s..10 Tbit/s")));
                }
            }
        }
        Ok(())
    }

    fn count_bound(&self) -> bool {
        self.bytes.is_some()
    }

    fn bound_hint(&self) -> String {
        "set run.duration or bulk.bytes".to_string()
    }

    fn ways(&self) -> &'static [Way] {
        self.direction.ways()
    }

    fn stream_count(&self, _cpus: usize) -> usize {
        self.flows as usize * self.direction.ways().len()
    }

    fn flow_count_mut(&mut self) -> Option<&mut u32> {
        Some(&mut self.flows)
    }

    fn share_totals(&mut self, _f: f64, part_of: &dyn Fn(u64) -> u64) {
        if let Some(n) = self.bytes.as_mut() {
            n.0 = part_of(n.0);
        }
    }

    fn server_cpus(&self) -> Option<&crate::units::CpuList> {
        self.server_cpus.as_ref()
    }

    fn pins_server(&self) -> bool {
        self.server_cpus.is_some()
    }

    fn asked_bits_per_s(&self, way: Way) -> Option<f64> {
        self.rate(way).map(|b| b.bits_per_s())
    }

    fn op_bytes(&self) -> Option<u64> {
        Some(self.block_bytes.bytes())
    }

    fn tcp_sets_the_rate(&self) -> bool {
        true
    }
}

/// bulk's own flags (the ones it shares with other kinds are [`SharedFlags`]).
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct BulkFlags {
    /// Stop after this many bytes in total (e.g. 10GiB); the duration still caps the run.
    #[cfg_attr(feature = "clap", arg(long))]
    pub bytes: Option<ByteSize>,
    /// Stop after this many blocks in total (iperf3 --blockcount): blocks of -l bytes, sent as
    /// --bytes would; the duration still caps the run.
    #[cfg_attr(feature = "clap", arg(long, value_name = "N", conflicts_with = "bytes"))]
    pub blockcount: Option<u64>,
    /// Send without copying from user space: sendfile (default) or msg (MSG_ZEROCOPY).
    #[cfg_attr(feature = "clap", arg(long = "zerocopy", short = 'Z', num_args = 0..=1, default_missing_value = "sendfile", value_enum))]
    pub send_mode: Option<SendMode>,
}

impl BulkFlags {
    /// The flags that are set.
    pub(crate) fn set(&self) -> Vec<&'static str> {
        let set = [
            ("--bytes", self.bytes.is_some()),
            ("--blockcount", self.blockcount.is_some()),
            ("--zerocopy", self.send_mode.is_some()),
        ];
        set.into_iter().filter(|(_, on)| *on).map(|(f, _)| f).collect()
    }
}

impl BulkSection {
    /// The rate each sending flow going `way` is held at (`-b`, `-b UP/DOWN`); none: as fast
    /// as TCP goes.
    pub fn rate(&self, way: crate::profile::Way) -> Option<crate::units::BitRate> {
        match way {
            crate::profile::Way::Up => self.bitrate,
            crate::profile::Way::Down => self.bitrate_down.or(self.bitrate),
        }
    }

    /// Applies the bulk flags (`--bytes` makes the byte count the bound, as iperf3 -n).
    pub fn apply(&mut self, own: &BulkFlags, shared: &SharedFlags, run: &mut RunSection) -> Result<(), SpecError> {
        set(&mut self.flows, shared.flows);
        set(&mut self.block_bytes, shared.block);
        let count =
            match &shared.count {
                Some(c) => Some(c.parse::<ByteSize>().map_err(|e| {
                    flag_err("-n", format!("{e}: a bulk test's -n is a byte count, as iperf3's (-n 1G)"))
                })?),
                None => None,
            };
        let blocks = own.blockcount.map(|n| ByteSize(n.saturating_mul(self.block_bytes.bytes())));
        if [own.bytes.is_some(), count.is_some(), blocks.is_some()].iter().filter(|&&b| b).count() > 1 {
            return Err(flag_err("-n", "--bytes, -n and --blockcount each set the byte count: give one".into()));
        }
        if let Some(n) = own.bytes.or(count).or(blocks) {
            self.bytes = Some(n);
            if shared.duration.is_none() {
                // As iperf3 -n: the byte count is the bound; the time cap still applies.
                run.duration = None;
            }
        }
        if shared.reverse {
            self.direction = Direction::Reverse;
        }
        if shared.bidir {
            self.direction = Direction::Bidir;
        }
        set(&mut self.send_mode, own.send_mode);
        if let Some((r, down)) = shared.bitrate.map(super::flags::one_bitrate).transpose()? {
            self.bitrate_down = super::flags::down_rate(r, down)?;
            // -b 0: as fast as TCP goes (iperf3's unlimited). A TCP test stays TCP: -u is the
            // only way to UDP.
            self.bitrate = (r.0 > 0.0).then_some(r);
        }
        if shared.server_cpus.is_some() {
            self.server_cpus = shared.server_cpus.clone();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_way_s_name_is_its_serialized_form() {
        for w in [Way::Up, Way::Down] {
            assert_eq!(serde_json::to_string(&w).unwrap(), format!("\"{}\"", w.name()));
        }
    }
}
