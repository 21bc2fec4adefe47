//! Which client agent tests against which server agent: the seeds' queue of server addresses,
//! as one rule.
//!
//! - `one-to-one`: client i runs the profile against server i mod S;
//! - `spread`: client i runs against every server, the profile's flows (bulk, rr, msgrate) or
//!   connections (http) divided among them;
//! - `mesh`: client i runs the whole profile against every server (C × S tests).

use netblast_spec::plan::split_budget;
use netblast_spec::profile::{Profile, Workload};

/// A pairing rule.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Pairing {
    /// Client i against server i mod S.
    #[default]
    OneToOne,
    /// Each client against every server, its flows divided among them.
    Spread,
    /// Each client against every server, the whole profile each.
    Mesh,
}

impl std::str::FromStr for Pairing {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "one-to-one" => Ok(Pairing::OneToOne),
            "spread" => Ok(Pairing::Spread),
            "mesh" => Ok(Pairing::Mesh),
            _ => Err(format!("invalid pairing {s:?}: expected one-to-one, spread or mesh")),
        }
    }
}

/// One test of a fleet: a client agent, the server agent it runs against (none: the profile's
/// own URLs), and its profile.
#[derive(Debug, Clone, PartialEq)]
pub struct Test {
    /// Index of the client agent.
    pub client: usize,
    /// Index of the server agent.
    pub server: Option<usize>,
    /// The test.
    pub profile: Profile,
}

/// The flow count a profile divides under `spread`.
fn flows_of(w: &mut Workload) -> Option<&mut u32> {
    match w {
        Workload::Bulk(b) => Some(&mut b.flows),
        Workload::Rr(r) => Some(&mut r.flows),
        Workload::Msgrate(m) => m.flows.as_mut(),
        Workload::Cps(c) => c.flows.as_mut(),
        Workload::Http(h) => Some(&mut h.connections),
    }
}

/// The tests of a fleet of `clients` client agents and `servers` server agents (0: the
/// profile's URLs are the servers).
pub fn tests(clients: usize, servers: usize, pairing: Pairing, profile: &Profile) -> Result<Vec<Test>, String> {
    if clients == 0 {
        return Err("a fleet needs at least one client agent".into());
    }
    if servers == 0 {
        if !profile.workload.is_http() {
            return Err(format!("a {} fleet needs server agents (--servers)", profile.kind().name()));
        }
        return Ok((0..clients).map(|c| Test { client: c, server: None, profile: profile.clone() }).collect());
    }
    let mut out = Vec::new();
    for c in 0..clients {
        match pairing {
            Pairing::OneToOne => out.push(Test { client: c, server: Some(c % servers), profile: profile.clone() }),
            Pairing::Mesh => {
                out.extend((0..servers).map(|s| Test { client: c, server: Some(s), profile: profile.clone() }))
            }
            Pairing::Spread => {
                let mut p = profile.clone();
                let total = *flows_of(&mut p.workload).ok_or_else(|| {
                    "spread divides a flow count: give --flows (msgrate runs one flow per CPU by default)".to_string()
                })?;
                for s in 0..servers {
                    let share = split_budget(total as u64, servers as u64, s as u64) as u32;
                    if share == 0 {
                        continue;
                    }
                    let mut p = profile.clone();
                    if let Some(f) = flows_of(&mut p.workload) {
                        *f = share;
                    }
                    p.description = format!("{} (spread: {share} of {total})", p.workload.describe(&p.run));
                    out.push(Test { client: c, server: Some(s), profile: p });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(flows: u32) -> Profile {
        let (mut p, _) = Profile::load("bulk-1flow").unwrap();
        p.workload.bulk_mut().unwrap().flows = flows;
        p
    }

    #[test]
    fn pairings() {
        let t = tests(3, 2, Pairing::OneToOne, &bulk(1)).unwrap();
        assert_eq!(
            t.iter().map(|t| (t.client, t.server)).collect::<Vec<_>>(),
            [(0, Some(0)), (1, Some(1)), (2, Some(0))]
        );
        assert_eq!(tests(2, 3, Pairing::Mesh, &bulk(1)).unwrap().len(), 6);
        let s = tests(1, 3, Pairing::Spread, &bulk(64)).unwrap();
        let flows: Vec<u32> = s
            .iter()
            .map(|t| match &t.profile.workload {
                Workload::Bulk(b) => b.flows,
                _ => 0,
            })
            .collect();
        assert_eq!(flows, [22, 21, 21], "64 flows over 3 servers add up");
        assert_eq!(tests(1, 3, Pairing::Spread, &bulk(2)).unwrap().len(), 2, "a server with no flow gets no test");
        assert!(tests(0, 1, Pairing::OneToOne, &bulk(1)).is_err());
        assert!(tests(1, 0, Pairing::OneToOne, &bulk(1)).unwrap_err().contains("--servers"));
        let (http, _) = Profile::load("http-max").unwrap();
        assert_eq!(tests(2, 0, Pairing::OneToOne, &http).unwrap().len(), 2, "http without servers: the URLs");
        let (pps, _) = Profile::load("pps-8core").unwrap();
        assert!(tests(1, 2, Pairing::Spread, &pps).unwrap_err().contains("--flows"));
    }
}
