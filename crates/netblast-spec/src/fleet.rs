//! The fleet session: what a coordinator and an agent say to each other once a fleet or
//! register connection is authenticated (the handshake of `netblast_wire::wire`, with the token
//! required on both sides).
//!
//! ```text
//! agent        -> Hello (who, where its ports are, its allowlist)
//! coordinator  -> ClockProbe t1           agent -> ClockReply t1 t2 t3     (8 or more times)
//! coordinator  -> Order (profile, target, start instant on the agent's clock)
//! agent        -> Accepted | Refused      (the allowlist, the profile, the agent's limits)
//! agent        -> Started (its real start) ; Interval ... (as each is released) ; Final | Failed
//! coordinator  -> Cancel (stop now, keep what was measured) ; Bye (the session ends)
//! ```
//!
//! Who dialed does not matter after the handshake: a coordinator dials agents it was given
//! (role `fleet`), agents started with `serve --register` dial the coordinator (role
//! `register`) and then wait for orders the same way. An agent whose coordinator connection is
//! gone stops the traffic it originates.

use crate::profile::Profile;
use crate::result::{AgentInfo, ClockInfo, HostInfo, Interval, RunResult};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// An agent introduces itself (first frame after the handshake).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentHello {
    /// Who it is.
    pub agent: AgentInfo,
    /// Its host.
    pub host: HostInfo,
    /// Its data port (where tests of other agents reach it).
    pub data_port: u16,
    /// Its HTTP responder's port, if it runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http_port: Option<u16>,
    /// Its HTTPS responder's port, if it runs one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub https_port: Option<u16>,
    /// The addresses its data port can be reached at: its interfaces', loopback last, or the one
    /// it is bound to.
    #[serde(deserialize_with = "crate::bounded::addresses")]
    pub addresses: Vec<IpAddr>,
    /// The group it registered in (`serve --group`), for `registered:GROUP:N` lists.
    #[serde(default)]
    pub group: String,
    /// The networks it may send traffic to (`serve --allow`), in words.
    #[serde(default, deserialize_with = "crate::bounded::allow")]
    pub allow: Vec<String>,
    /// Its netblast version.
    pub version: String,
}

/// An order to originate one test.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Order {
    /// The coordinator's number for it; every answer names it.
    pub id: u32,
    /// The test (validated again by the agent).
    pub profile: Profile,
    /// Where: a server agent's data port `HOST:PORT`, or for http the authority paths go to
    /// (absolute URLs in the profile carry their own).
    pub target: String,
    /// The common start instant on the agent's own clock (UTC ns).
    pub start_at_unix_ns: u64,
    /// The agent's clock against the coordinator's, recorded in its result.
    pub clock: ClockInfo,
    /// A label for logs and results (e.g. `client 3 -> server 1`).
    #[serde(default, deserialize_with = "crate::bounded::label")]
    pub label: String,
}

/// The number of the order a coordinator's frame carries, read even when the rest of the
/// frame does not decode (too deep, a field twice, a list past its bound: what else it holds
/// is skipped without recursion), so the refusal can name the order.
pub fn order_named(frame: &[u8]) -> Option<u32> {
    #[derive(Deserialize)]
    struct Named {
        #[serde(rename = "type")]
        kind: String,
        id: u32,
    }
    serde_json::from_slice::<Named>(frame).ok().filter(|n| n.kind == "order").map(|n| n.id)
}

/// Frames from a coordinator to an agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum CoordMsg {
    /// A clock exchange: `t1` is the coordinator's clock when it sent this.
    ClockProbe {
        /// Send time, coordinator clock (UTC ns).
        t1: u64,
    },
    /// Originate a test.
    Order(Box<Order>),
    /// Stop the test now, keeping what was measured.
    Cancel {
        /// Why, for the agent's log.
        reason: String,
    },
    /// The session is over.
    Bye,
}

/// Frames from an agent to a coordinator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum AgentMsg {
    /// The first frame.
    Hello(Box<AgentHello>),
    /// The answer to a clock probe.
    ClockReply {
        /// The probe's send time (coordinator clock).
        t1: u64,
        /// When the agent read the probe (agent clock).
        t2: u64,
        /// When the agent sent this reply (agent clock).
        t3: u64,
    },
    /// The order is valid and allowed: set-up has begun.
    Accepted {
        /// The order.
        id: u32,
    },
    /// The order is refused (target outside the allowlist, invalid profile, a limit).
    Refused {
        /// The order.
        id: u32,
        /// Why.
        reason: String,
    },
    /// The test started.
    Started {
        /// The order.
        id: u32,
        /// The start instant intervals count from (agent clock, UTC ns).
        start_unix_ns: u64,
        /// When the start gate really opened (agent clock, UTC ns).
        actual_start_unix_ns: u64,
    },
    /// One interval, as the agent's client released it (both ends, histograms).
    Interval {
        /// The order.
        id: u32,
        /// The interval.
        interval: Box<Interval>,
    },
    /// The test's whole result.
    Final {
        /// The order.
        id: u32,
        /// The result.
        result: Box<RunResult>,
    },
    /// The test could not be run.
    Failed {
        /// The order.
        id: u32,
        /// Why.
        error: String,
    },
}

/// One four-timestamp clock exchange: `t1` coordinator sends, `t2` agent receives, `t3` agent
/// replies, `t4` coordinator receives (each on its own clock, UTC ns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClockSample {
    /// Coordinator send.
    pub t1: u64,
    /// Agent receive.
    pub t2: u64,
    /// Agent send.
    pub t3: u64,
    /// Coordinator receive.
    pub t4: u64,
}

impl ClockSample {
    /// Round trip less the agent's own time: what the network took, ns.
    pub fn delay(&self) -> u64 {
        (self.t4 as i128 - self.t1 as i128 - (self.t3 as i128 - self.t2 as i128)).max(0) as u64
    }

    /// The agent's clock minus the coordinator's, assuming both ways took as long, ns.
    pub fn offset(&self) -> i64 {
        (((self.t2 as i128 - self.t1 as i128) + (self.t3 as i128 - self.t4 as i128)) / 2) as i64
    }
}

/// Least clock exchanges per agent.
pub const MIN_CLOCK_SAMPLES: usize = 8;

/// The largest clock error an agent may have: past it, its answers cannot place a common start
/// (the start lead grows with the worst error), and the agent is dropped from the fleet.
pub const MAX_CLOCK_ERROR: std::time::Duration = std::time::Duration::from_secs(1);

/// Checks an agent's clock answers: each says it held the probe for no less than 0 and no
/// more than the whole round trip, and the clock they give is within [`MAX_CLOCK_ERROR`]. An
/// error says which answer or bound failed.
pub fn checked_clock(samples: &[ClockSample]) -> Result<ClockInfo, String> {
    for (i, s) in samples.iter().enumerate() {
        let held = s.t3 as i128 - s.t2 as i128;
        let round = s.t4 as i128 - s.t1 as i128;
        if held < 0 || held > round {
            return Err(format!(
                "clock answer {i} is impossible: it says it held the probe {held} ns of a {round} ns round trip"
            ));
        }
    }
    let clock = clock_of(samples).ok_or("no clock answer")?;
    if clock.error_ns > MAX_CLOCK_ERROR.as_nanos() as u64 {
        return Err(format!(
            "its clock answers leave an error of {} ns, over the {} s a fleet allows",
            clock.error_ns,
            MAX_CLOCK_ERROR.as_secs()
        ));
    }
    Ok(clock)
}

/// The clock of an agent from its exchanges: the least-delay sample's offset, within half its
/// delay (the true offset lies within that whatever the two directions took).
pub fn clock_of(samples: &[ClockSample]) -> Option<ClockInfo> {
    let best = samples.iter().min_by_key(|s| s.delay())?;
    Some(ClockInfo {
        source: crate::result::ClockSource::Coordinator,
        offset_ns: best.offset(),
        error_ns: best.delay().div_ceil(2),
    })
}

/// The first record of a fleet log: who takes part and what runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogHeader {
    /// The common start instant, coordinator clock (UTC ns).
    pub t0_unix_ns: u64,
    /// The profile every test ran (tests of a `spread` fleet divide its flows).
    pub profile: Profile,
    /// Every agent.
    pub agents: Vec<LogAgent>,
    /// Every test: its order id is its index.
    pub tests: Vec<LogTest>,
}

/// An agent in a fleet log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogAgent {
    /// `client` or `server`.
    pub role: String,
    /// Where the coordinator reached it.
    pub address: String,
    /// Its host name.
    pub hostname: String,
    /// Its clock against the coordinator's.
    pub clock: ClockInfo,
}

/// A test in a fleet log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogTest {
    /// Index of the client agent.
    pub client: usize,
    /// Index of the server agent (none: the profile's URLs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<usize>,
}

/// One line of a fleet log (JSON lines, appended as frames arrive, so a coordinator that dies
/// loses nothing it received).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogRecord {
    /// The fleet: first line.
    Fleet(Box<LogHeader>),
    /// A frame from an agent.
    Frame {
        /// Index of the agent.
        agent: usize,
        /// Arrival, coordinator clock (UTC ns).
        at_ns: u64,
        /// The frame.
        msg: Box<AgentMsg>,
    },
    /// An agent the coordinator gave up on.
    Failed {
        /// Index of the agent.
        agent: usize,
        /// Why.
        why: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hello_naming_more_addresses_than_a_host_has_is_refused_while_read() {
        // Found in the audit: a 14 MB hello of 1 000 000 addresses took the coordinator to
        // 130 MB. The list stops at its bound, named.
        let hello = |n: usize| {
            let addrs: Vec<String> =
                (0..n).map(|i| format!("\"10.{}.{}.{}\"", i >> 16 & 255, i >> 8 & 255, i & 255)).collect();
            format!(
                r#"{{"type":"hello","agent":{{"hostname":"h","id":"i","address":""}},"host":{},"data_port":1,"addresses":[{}],"version":"v"}}"#,
                serde_json::to_string(&crate::result::HostInfo::default()).unwrap(),
                addrs.join(",")
            )
        };
        assert!(serde_json::from_str::<AgentMsg>(&hello(crate::bounded::MAX_ADDRESSES)).is_ok());
        let e = serde_json::from_str::<AgentMsg>(&hello(1_000_000)).unwrap_err().to_string();
        assert!(e.contains("addresses") && e.contains("4096"), "{e}");
    }

    #[test]
    fn clock_answers_outside_their_bounds_drop_the_agent_with_the_reason() {
        let good = ClockSample { t1: 1_000, t2: 5_000_400, t3: 5_000_500, t4: 2_000 };
        let c = checked_clock(&[good]).unwrap();
        assert_eq!(c.error_ns, 450);
        // Found in the audit: t2 - t3 = 10^15 ns put T0 in 2027 and every agent refused it.
        let forged = ClockSample { t2: 1_000_000_000_000_000 + 5_000_500, ..good };
        let e = checked_clock(&[good, forged]).unwrap_err();
        assert!(e.contains("clock answer 1 is impossible"), "{e}");
        // An agent that says it held the probe longer than the whole round trip.
        let long = ClockSample { t3: good.t2 + 10_000, ..good };
        assert!(checked_clock(&[long]).unwrap_err().contains("impossible"));
        // A real but too slow exchange: 3 s round trips.
        let slow = ClockSample { t1: 0, t2: 10, t3: 20, t4: 3_000_000_000 };
        let e = checked_clock(&[slow]).unwrap_err();
        assert!(e.contains("over the 1 s"), "{e}");
        assert!(checked_clock(&[]).is_err());
    }

    #[test]
    fn the_least_delay_sample_sets_the_clock() {
        // Agent clock 1 ms ahead; the second exchange waited 3 ms on the way back.
        let s = [
            ClockSample { t1: 0, t2: 1_000_100, t3: 1_000_200, t4: 300 },
            ClockSample { t1: 10_000, t2: 1_010_100, t3: 1_010_200, t4: 3_010_300 },
        ];
        assert_eq!(s[0].delay(), 200);
        assert_eq!(s[0].offset(), 1_000_000);
        let c = clock_of(&s).unwrap();
        assert_eq!((c.offset_ns, c.error_ns), (1_000_000, 100));
        assert!(clock_of(&[]).is_none());
    }

    #[test]
    fn messages_roundtrip_and_tolerate_new_fields() {
        let m = AgentMsg::ClockReply { t1: 1, t2: 2, t3: 3 };
        let j = serde_json::to_string(&m).unwrap();
        assert_eq!(serde_json::from_str::<AgentMsg>(&j).unwrap(), m);
        let m: CoordMsg = serde_json::from_str(r#"{"type":"cancel","reason":"x","later":true}"#).unwrap();
        assert_eq!(m, CoordMsg::Cancel { reason: "x".into() });
    }
}

/// Fleet-wide figures of one interval (from the tests' counters; the exact merge, with
/// histograms, is made from their final results).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetInterval {
    /// Interval index.
    pub index: u32,
    /// Start, s after T0.
    pub start_s: f64,
    /// End, s after T0.
    pub end_s: f64,
    /// Bits per second over every test (received where the receivers reported, else sent).
    pub bits_per_s: f64,
    /// The kind's own operations per second over every test, and what they are: responses
    /// (http), transactions (rr), connections (cps), messages (msgrate); none for bulk.
    pub ops: Option<(&'static str, f64)>,
    /// Tests that reported this interval.
    pub reporting: usize,
    /// Tests running.
    pub running: usize,
    /// The test with the lowest rate: its client agent's address and its rate (`ops` per
    /// second where the kind has them, else bit/s).
    pub slowest: Option<(String, f64)>,
}

impl FleetInterval {
    /// The stragglers after the last tick (shorter than a tenth of the reporting interval):
    /// never printed as a line of their own (a rate over "3.00-3.00 sec" misleads); the merged
    /// result folds them into the interval before.
    pub fn is_short_tail(&self, interval_s: f64) -> bool {
        self.index > 0 && self.end_s - self.start_s < interval_s * 0.1
    }
}

/// An agent's actual start on the reference clock: its own wall clock's reading less the
/// offset the coordinator measured. The one conversion behind the start skew of a fleet's
/// result and of its log's replay.
pub fn reference_start(actual_unix_ns: u64, clock: Option<&crate::result::ClockInfo>) -> u64 {
    let off = clock.map(|c| c.offset_ns).unwrap_or(0);
    (actual_unix_ns as i128 - off as i128).max(0) as u64
}
