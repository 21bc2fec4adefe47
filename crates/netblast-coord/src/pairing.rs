//! Which client agent tests against which server agent: the seeds' queue of server addresses,
//! as one rule.
//!
//! - `one-to-one`: client i runs the profile against server i mod S;
//! - `spread`: client i runs against every server, the profile's flows (bulk, rr, msgrate, cps)
//!   or connections (http) divided among them, and with them its totals (a cps or http rate,
//!   a bulk byte count, an http request count) in the same shares;
//! - `mesh`: client i runs the whole profile against every server (C × S tests).

use netblast_spec::plan::split_budget;
use netblast_spec::profile::Profile;

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

impl std::fmt::Display for Pairing {
    /// The name `--pairing` takes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Pairing::OneToOne => "one-to-one",
            Pairing::Spread => "spread",
            Pairing::Mesh => "mesh",
        })
    }
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

/// The tests of a fleet of `clients` client agents and `servers` server agents (0: the
/// profile's URLs are the servers).
pub fn tests(clients: usize, servers: usize, pairing: Pairing, profile: &Profile) -> Result<Vec<Test>, String> {
    if clients == 0 {
        return Err("a fleet needs at least one client agent".into());
    }
    if servers == 0 {
        if !profile.workload.aims_at_urls() {
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
                let total = *p.workload.flow_count_mut().ok_or_else(|| {
                    "spread divides a flow count: give --flows (msgrate runs one flow per CPU by default)".to_string()
                })?;
                let mut from = 0u64;
                for s in 0..servers {
                    let share = split_budget(total as u64, servers as u64, s as u64) as u32;
                    if share == 0 {
                        continue;
                    }
                    let mut p = profile.clone();
                    if let Some(f) = p.workload.flow_count_mut() {
                        *f = share;
                    }
                    p.workload.share_totals(from, from + share as u64, total as u64);
                    from += share as u64;
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
    use netblast_spec::profile::Workload;

    fn bulk(flows: u32) -> Profile {
        let (mut p, _) = Profile::load("bulk-1flow").unwrap();
        p.workload.bulk_mut().unwrap().flows = flows;
        p
    }

    /// One figure of each test's workload.
    fn per_test<T>(tests: &[Test], f: impl Fn(&Workload) -> T) -> Vec<T> {
        tests.iter().map(|t| f(&t.profile.workload)).collect()
    }

    #[test]
    fn pairings() {
        let t = tests(3, 2, Pairing::OneToOne, &bulk(1)).unwrap();
        assert_eq!(
            t.iter().map(|t| (t.client, t.server)).collect::<Vec<_>>(),
            [(0, Some(0)), (1, Some(1)), (2, Some(0))]
        );
        assert_eq!(tests(2, 3, Pairing::Mesh, &bulk(1)).unwrap().len(), 6);
        let flows = per_test(&tests(1, 3, Pairing::Spread, &bulk(64)).unwrap(), |w| match w {
            Workload::Bulk(b) => b.flows,
            _ => 0,
        });
        assert_eq!(flows, [22, 21, 21], "64 flows over 3 servers add up");
        assert_eq!(tests(1, 3, Pairing::Spread, &bulk(2)).unwrap().len(), 2, "a server with no flow gets no test");
        assert!(tests(0, 1, Pairing::OneToOne, &bulk(1)).is_err());
        assert!(tests(1, 0, Pairing::OneToOne, &bulk(1)).unwrap_err().contains("--servers"));
        let (http, _) = Profile::load("http-max").unwrap();
        assert_eq!(tests(2, 0, Pairing::OneToOne, &http).unwrap().len(), 2, "http without servers: the URLs");
        let (pps, _) = Profile::load("pps-8core").unwrap();
        assert!(tests(1, 2, Pairing::Spread, &pps).unwrap_err().contains("--flows"));
    }

    #[test]
    fn spread_divides_totals_with_the_flows() {
        // cps: 20k connections/s over 4 flows, 3 servers (2, 1, 1 flows): 10k, 5k, 5k.
        let (mut cps, _) = Profile::load("cps").unwrap();
        let Workload::Cps(c) = &mut cps.workload else { panic!("cps is cps") };
        c.flows = Some(4);
        c.rate = Some(netblast_spec::units::Rate(20_000.0));
        let rates = per_test(&tests(1, 3, Pairing::Spread, &cps).unwrap(), |w| match w {
            Workload::Cps(c) => c.rate.unwrap().0,
            _ => 0.0,
        });
        assert_eq!(rates, [10_000.0, 5_000.0, 5_000.0]);
        // Mesh and one-to-one keep the whole profile per test.
        assert!(tests(1, 3, Pairing::Mesh, &cps).unwrap().iter().all(|t| t.profile == cps));
        // http: rate, ramp target, steps and the request count in shares that add up exactly.
        let (mut http, _) = Profile::load("http-max").unwrap();
        let h = http.workload.http_mut().unwrap();
        h.connections = 10;
        h.rate = Some(netblast_spec::units::Rate(1000.0));
        h.rate_to = Some(netblast_spec::units::Rate(3000.0));
        h.requests = Some(1001);
        let hs = per_test(&tests(1, 3, Pairing::Spread, &http).unwrap(), |w| w.http().unwrap().clone());
        assert_eq!(hs.iter().map(|h| h.connections).collect::<Vec<_>>(), [4, 3, 3]);
        assert_eq!(hs.iter().map(|h| h.rate.unwrap().0).collect::<Vec<_>>(), [400.0, 300.0, 300.0]);
        assert_eq!(hs.iter().map(|h| h.rate_to.unwrap().0).collect::<Vec<_>>(), [1200.0, 900.0, 900.0]);
        assert_eq!(hs.iter().map(|h| h.requests.unwrap()).sum::<u64>(), 1001);
        // bulk: a byte count divided, adding up exactly.
        let mut b = bulk(3);
        b.workload.bulk_mut().unwrap().bytes = Some(netblast_spec::units::ByteSize(1_000_000_001));
        let bytes = per_test(&tests(1, 2, Pairing::Spread, &b).unwrap(), |w| match w {
            Workload::Bulk(b) => b.bytes.unwrap().0,
            _ => 0,
        });
        assert_eq!(bytes.iter().sum::<u64>(), 1_000_000_001);
    }
}
