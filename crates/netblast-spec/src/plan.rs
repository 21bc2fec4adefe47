//! Planning: a validated profile and a target resolved against a machine into a [`Plan`], and
//! the streams of a plan. Pure functions of their inputs (the machine's usable CPUs are passed
//! in), so the client, `serve` and a coordinator plan the same way without the engine.

use crate::profile::{Profile, Way};
use crate::result::Plan;
use crate::units::{CpuList, Dur};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

/// One stream of a plan: the client opens it, the set-up message names it to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamSetup {
    /// Stream id.
    pub id: u32,
    /// Which way bytes flow on it.
    pub way: Way,
    /// CPU the server should pin its end of the stream to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<usize>,
    /// CPU the client's end of the stream runs on: a server on the client's kernel (another
    /// network namespace, a pod on the same node) keeps its end off it. Absent when the profile
    /// names the server's CPUs (`server_cpus`): those are kept as asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_cpu: Option<usize>,
}

/// Port `netblast serve` listens on unless told otherwise.
pub const DEFAULT_PORT: u16 = 5210;

/// Why a profile could not be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// The target could not be parsed or resolved.
    #[error("invalid target {target:?}: {why}")]
    Target {
        /// What the user wrote.
        target: String,
        /// Why it does not work.
        why: String,
    },
    /// `--cpus` names CPUs this process cannot use.
    #[error("{0}")]
    Cpus(String),
}

/// A target's host and port as written (`HOST`, `HOST:PORT`, `[V6]:PORT`, a bare IPv6
/// address), without resolving; `None` when a port is there and is not one.
pub fn split_host_port(target: &str) -> Option<(&str, Option<u16>)> {
    let t = target.trim();
    if t.parse::<IpAddr>().is_ok() {
        return Some((t, None));
    }
    match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => {
            let port = p.parse::<u16>().ok().filter(|p| *p > 0)?;
            Some((h.trim_start_matches('[').trim_end_matches(']'), Some(port)))
        }
        _ => Some((t, None)),
    }
}

/// Parses `HOST`, `HOST:PORT`, `[V6]:PORT` or a bare IPv6 address, defaulting the port, and
/// resolves a host name (the first address).
pub fn resolve_target(target: &str, default_port: u16) -> Result<SocketAddr, PlanError> {
    resolve_all(target, default_port)?
        .into_iter()
        .next()
        .ok_or_else(|| PlanError::Target { target: target.to_string(), why: "name resolves to no address".into() })
}

/// As [`resolve_target`], every address a name resolves to (a Kubernetes headless Service
/// resolves to one address per pod).
pub fn resolve_all(target: &str, default_port: u16) -> Result<Vec<SocketAddr>, PlanError> {
    let bad = |why: String| PlanError::Target { target: target.to_string(), why };
    let t = target.trim();
    if t.is_empty() {
        return Err(bad("empty".into()));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, default_port)]);
    }
    if let Ok(sa) = t.parse::<SocketAddr>() {
        return Ok(vec![sa]);
    }
    let (host, port) = match t.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') || h.starts_with('[') => {
            let port = p.parse::<u32>().map_err(|_| bad(format!("port {p:?} is not a number")))?;
            if port == 0 || port > 65535 {
                return Err(bad(format!("port {port} is outside 1..65535")));
            }
            (h.trim_start_matches('[').trim_end_matches(']'), port as u16)
        }
        _ => (t, default_port),
    };
    if host.is_empty() {
        return Err(bad("no host before the port".into()));
    }
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let addrs: Vec<SocketAddr> =
        (host, port).to_socket_addrs().map_err(|e| bad(format!("cannot resolve {host}: {e}")))?.collect();
    if addrs.is_empty() {
        return Err(bad("name resolves to no address".into()));
    }
    Ok(addrs)
}

/// The client CPUs: the requested list, or all usable (`allowed`). With `strict` (the list came
/// from `--cpus`) a CPU this process cannot use is an error; otherwise (the list came from a
/// profile written for a bigger machine) the usable part is taken and a note says so.
pub fn resolve_cpus(
    requested: Option<&CpuList>,
    allowed: &[usize],
    strict: bool,
) -> Result<(Vec<usize>, Option<String>), PlanError> {
    let Some(list) = requested else { return Ok((allowed.to_vec(), None)) };
    let missing: Vec<usize> = list.0.iter().copied().filter(|c| !allowed.contains(c)).collect();
    if missing.is_empty() {
        return Ok((list.0.clone(), None));
    }
    let usable: Vec<usize> = list.0.iter().copied().filter(|c| allowed.contains(c)).collect();
    if strict || usable.is_empty() {
        return Err(PlanError::Cpus(format!(
            "--cpus names CPU {} which this process cannot use (usable CPUs: {})",
            CpuList(missing),
            CpuList(allowed.to_vec())
        )));
    }
    let note = format!(
        "the profile asks for CPUs {}; this host lets netblast use {}: running on those",
        CpuList(list.0.clone()),
        CpuList(usable.clone())
    );
    Ok((usable, Some(note)))
}

/// Resolves a validated profile against a machine (its usable CPUs) and a target into a
/// [`Plan`]. `cpus_from_flag`: the CPU list came from `--cpus` (strict) rather than the profile.
pub fn plan(
    profile: Profile,
    origin: String,
    target: &str,
    allowed_cpus: &[usize],
    cpus_from_flag: bool,
) -> Result<(Plan, SocketAddr), PlanError> {
    let w = &profile.workload;
    // URLs are resolved one by one by the http generator; a target only completes paths.
    let peer = if target.is_empty() && w.aims_at_urls() {
        SocketAddr::from(([0, 0, 0, 0], 0))
    } else {
        resolve_target(target, w.section().target_port(DEFAULT_PORT))?
    };
    let (client_cpus, note) = resolve_cpus(profile.run.cpus.as_ref(), allowed_cpus, cpus_from_flag)?;
    // A msgrate profile without a flow count runs one flow per CPU: say that in flow terms.
    let per_cpu_flows = w.flows_per_cpu();
    let mut notes: Vec<String> = note.filter(|_| !per_cpu_flows).into_iter().collect();
    let n_streams = w.stream_count(client_cpus.len());
    let server_cpus = match (w.pins_server(), w.server_cpus()) {
        (false, _) => Vec::new(),
        (true, Some(list)) => (0..n_streams).map(|i| list.0[i % list.0.len()]).collect(),
        (true, None) => {
            // Stream i's client end runs on client_cpus[i % n]. A peer on this same host gets the
            // CPU half the list away, so the two ends of a flow never share a core.
            let n = client_cpus.len();
            let shift = if peer.ip().is_loopback() && n > 1 { n / 2 } else { 0 };
            if shift > 0 {
                notes.push("the server is on this host: each flow's server end is pinned half the CPU list away from its client end".into());
            }
            (0..n_streams).map(|i| client_cpus[(i + shift) % n]).collect()
        }
    };
    if per_cpu_flows {
        if let Some(asked) = profile.run.cpus.as_ref().filter(|c| c.0.len() != client_cpus.len()) {
            notes.insert(
                0,
                format!(
                    "the profile asks for one flow per CPU on CPUs {} ({} flows); this host lets netblast use {} CPUs ({}): running {} flows, one per CPU",
                    CpuList(asked.0.clone()),
                    asked.0.len(),
                    client_cpus.len(),
                    CpuList(client_cpus.clone()),
                    client_cpus.len()
                ),
            );
        }
    }
    if w.spins() && peer.ip().is_loopback() && 2 * n_streams > client_cpus.len() {
        notes.push(format!(
            "wait = spin with {n_streams} flow(s) on this host: {} busy-polling threads share {} CPU(s) and will \
             take turns, which shows as millisecond outliers; use fewer flows or --wait block",
            2 * n_streams,
            client_cpus.len()
        ));
    }
    let plan = Plan {
        origin,
        target: target.to_string(),
        peer: peer.to_string(),
        client_cpus,
        server_cpus,
        notes,
        time_bound: Dur(profile.time_bound()),
        start_at_unix_ns: None,
        bind: Default::default(),
        profile,
    };
    Ok((plan, peer))
}

/// Splits `total` over `n` parts so they add up exactly; part `k` of `n`.
pub fn split_budget(total: u64, n: u64, k: u64) -> u64 {
    let n = n.max(1);
    total / n + u64::from(k < total % n)
}

/// The streams of a plan, ids in order (up streams first), with their server CPUs.
pub fn stream_setups(plan: &Plan) -> Vec<StreamSetup> {
    let w = &plan.profile.workload;
    let n = w.stream_count(plan.client_cpus.len());
    // Each way the workload's bytes go has its share of the streams, up streams first.
    let ways = w.ways();
    let per_way = n / ways.len().max(1);
    let ways: Vec<Way> = ways.iter().flat_map(|&way| std::iter::repeat_n(way, per_way)).collect();
    let count = ways.len();
    ways.into_iter()
        .enumerate()
        .map(|(i, way)| StreamSetup {
            id: i as u32,
            way,
            server_cpu: plan.server_cpus.get(i).copied(),
            // CPUs the profile names for the server are kept as asked (iperf3 -A).
            client_cpu: Some(client_cpu_of(plan, i, count)).filter(|_| w.server_cpus().is_none()),
        })
        .collect()
}

/// The client CPU that drives stream `i` of a plan: bulk spreads streams round-robin over one
/// worker per CPU (at most one per stream), the message kinds run stream i on CPU i (wrapping).
pub fn client_cpu_of(plan: &Plan, i: usize, streams: usize) -> usize {
    let ncpu = plan.client_cpus.len().max(1);
    let workers = if plan.profile.workload.worker_per_stream() { ncpu } else { ncpu.min(streams).max(1) };
    plan.client_cpus[i % workers]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_split_as_written() {
        assert_eq!(split_host_port("10.0.0.1"), Some(("10.0.0.1", None)));
        assert_eq!(split_host_port("host:5201"), Some(("host", Some(5201))));
        assert_eq!(split_host_port("[::1]:5201"), Some(("::1", Some(5201))));
        assert_eq!(split_host_port("::1"), Some(("::1", None)));
        assert_eq!(split_host_port("host:http"), None);
        assert_eq!(split_host_port("host:0"), None);
    }

    #[test]
    fn targets() {
        let t = |s| resolve_target(s, DEFAULT_PORT);
        assert_eq!(t("127.0.0.1").unwrap(), "127.0.0.1:5210".parse().unwrap());
        assert_eq!(t("127.0.0.1:9").unwrap(), "127.0.0.1:9".parse().unwrap());
        assert_eq!(t("::1").unwrap(), "[::1]:5210".parse().unwrap());
        assert_eq!(t("[::1]:7").unwrap(), "[::1]:7".parse().unwrap());
        assert_eq!(t("localhost:8").unwrap().port(), 8);
        assert!(t("").is_err());
        assert!(t("no-such-host.invalid").is_err());
        let e = t("127.0.0.1:99999").unwrap_err().to_string();
        assert!(e.contains("99999") && e.contains("outside"), "{e}");
        let e = t("localhost:http").unwrap_err().to_string();
        assert!(e.contains("not a number"), "{e}");
    }

    #[test]
    fn budgets_add_up() {
        for (total, n) in [(10u64, 3u64), (1, 4), (1 << 30, 7), (5, 5)] {
            let sum: u64 = (0..n).map(|k| split_budget(total, n, k)).sum();
            assert_eq!(sum, total);
        }
    }

    #[test]
    fn missing_cpu_is_a_clear_error() {
        let e = resolve_cpus(Some(&CpuList(vec![4000])), &[0, 1], true).unwrap_err().to_string();
        assert!(e.contains("CPU 4000"), "{e}");
        assert!(e.contains("usable CPUs"), "{e}");
        // From a profile written for a bigger host: the usable part, with a note.
        let (cpus, note) = resolve_cpus(Some(&CpuList(vec![0, 4000])), &[0, 1], false).unwrap();
        assert_eq!(cpus, vec![0]);
        assert!(note.unwrap().contains("4000"));
    }

    #[test]
    fn streams_of_a_bidir_plan_go_up_first() {
        let (mut p, o) = Profile::load("bulk-1flow").unwrap();
        let b = p.workload.bulk_mut().unwrap();
        b.flows = 2;
        b.direction = crate::profile::Direction::Bidir;
        let (plan, _) = plan(p, o, "127.0.0.1", &[0, 1], false).unwrap();
        let s = stream_setups(&plan);
        assert_eq!(s.iter().map(|x| x.way).collect::<Vec<_>>(), [Way::Up, Way::Up, Way::Down, Way::Down]);
        assert_eq!(s.iter().map(|x| x.id).collect::<Vec<_>>(), [0, 1, 2, 3]);
    }
}
