//! Overrides: what command-line flags change in a loaded profile, as plain data, applied before
//! validation. The binary fills an [`Overrides`] from its flags; a coordinator can send one.
//!
//! A flag that does not apply to the profile's kind is an error naming the flag. Once anything
//! is overridden, the profile's description is rewritten from the resulting workload, so a
//! result never says "One TCP flow for 10 s" of a run with 64 flows for 3 s.

use super::flags::{SharedFlags, flag_err, set_some};
use super::{Kind, KindFlags, Profile, Workload};
use crate::error::SpecError;
use crate::units::{ByteSize, CpuList, Dur, Rate};

/// Flag values that replace profile fields; `None`/`false`/empty leaves the field alone.
///
/// These are the command line's profile flags themselves (with the `clap` feature, `netblast
/// run` and `netblast fleet` flatten this struct): the run's and `[tcp]`'s here, those more
/// than one kind reads in [`SharedFlags`], each kind's own in its file beside its section
/// (`CpsFlags` in `cps.rs`), which also applies them, gathered in [`KindFlags`]. A setting is
/// defined twice: in its section and as its flag.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Overrides {
    /// The flags more than one kind reads, and the duration.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub shared: SharedFlags,
    /// Run this long first and leave it out of the totals, e.g. 2s (iperf3 -O: skip slow
    /// start); bulk; the test lasts -t more.
    #[cfg_attr(feature = "clap", arg(long, short = 'O'))]
    pub omit: Option<Dur>,
    /// Reporting interval.
    #[cfg_attr(feature = "clap", arg(long, short = 'i'))]
    pub interval: Option<Dur>,
    /// Latency probes beside the test: RATE round trips per second (default 5/s) on a flow of
    /// their own to the same server, from an idle phase before the load (--idle) through the
    /// load: the latency the load adds.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_name = "RATE", num_args = 0..=1, default_missing_value = "5/s", require_equals = false)
    )]
    pub latency_probe: Option<Rate>,
    /// The latency probes' idle phase before the load starts (default 2s): a whole number of
    /// intervals.
    #[cfg_attr(feature = "clap", arg(long))]
    pub idle: Option<Dur>,
    /// The latency probes go over UDP (default TCP).
    #[cfg_attr(feature = "clap", arg(long))]
    pub probe_udp: bool,
    /// Client CPUs for the pinned workers, e.g. 0-3,6 (default: all usable CPUs).
    #[cfg_attr(feature = "clap", arg(long))]
    pub cpus: Option<CpuList>,
    /// Socket buffer size for both SO_SNDBUF and SO_RCVBUF (iperf3 -w).
    #[cfg_attr(feature = "clap", arg(long, short = 'w'))]
    pub window: Option<ByteSize>,
    /// SO_SNDBUF.
    #[cfg_attr(feature = "clap", arg(long))]
    pub sndbuf: Option<ByteSize>,
    /// SO_RCVBUF.
    #[cfg_attr(feature = "clap", arg(long))]
    pub rcvbuf: Option<ByteSize>,
    /// TCP maximum segment size (TCP_MAXSEG).
    #[cfg_attr(feature = "clap", arg(long, short = 'M'))]
    pub mss: Option<u32>,
    /// TCP congestion control algorithm, e.g. cubic, bbr.
    #[cfg_attr(feature = "clap", arg(long, short = 'C'))]
    pub congestion: Option<String>,
    /// Set TCP_NODELAY (disable Nagle).
    #[cfg_attr(feature = "clap", arg(long, short = 'N'))]
    pub nodelay: bool,
    /// The DSCP mark of every data packet, both ways (the server marks what it sends): EF,
    /// AF11-AF43, CS0-CS7, VA, LE or 0-63 (iperf3 --dscp).
    #[cfg_attr(feature = "clap", arg(long, value_name = "DSCP"))]
    pub dscp: Option<crate::mark::Dscp>,
    /// The TOS byte, as iperf3's -S takes it (0xb8, 184): its DSCP bits, as --dscp.
    #[cfg_attr(
        feature = "clap",
        arg(long, short = 'S', value_name = "TOS", value_parser = crate::mark::Dscp::from_tos, conflicts_with = "dscp")
    )]
    pub tos: Option<crate::mark::Dscp>,
    /// Each kind's own flags.
    #[cfg_attr(feature = "clap", command(flatten))]
    pub kinds: KindFlags,
}

/// Whether a target is a URL (`http://…`, `https://…`): the test is then an HTTP one.
pub fn is_url(target: &str) -> bool {
    let t = target.to_ascii_lowercase();
    t.starts_with("http://") || t.starts_with("https://")
}

impl Overrides {
    /// The profile a run asks for: `name` (a built-in profile or a file), or without one
    /// `http-max` when a `--url` or a URL `target` says the test is HTTP, `udp-1g` with `--udp`,
    /// else `bulk-1flow`; with these overrides applied (a URL target requested as a
    /// `--url` would be) and validated. Returns it with its origin.
    pub fn profile(&self, name: Option<&str>, target: Option<&str>) -> Result<(Profile, String), SpecError> {
        let url_target = target.filter(|t| is_url(t));
        let name = match name {
            Some(p) => p,
            None if !self.kinds.http.urls.is_empty() || url_target.is_some() => "http-max",
            // -b alone never switches protocol: -u is the only way to UDP.
            None if self.shared.udp => "udp-1g",
            None => "bulk-1flow",
        };
        let (mut profile, origin) = Profile::load(name)?;
        let mut overrides = self.clone();
        if let Some(u) = url_target {
            if !profile.workload.aims_at_urls() {
                return Err(SpecError::Flag {
                    flag: "--target".into(),
                    message: format!(
                        "{u} is a URL, but profile {name} is a {} test: name an http profile, or give HOST[:PORT]",
                        profile.kind().name()
                    ),
                });
            }
            overrides.kinds.http.urls.insert(0, u.to_string());
        }
        overrides.apply(&mut profile, &origin)?;
        let origin = if overrides.is_empty() { origin } else { format!("{origin} (with command-line overrides)") };
        profile.validate(&origin)?;
        Ok((profile, origin))
    }

    /// The kind-specific flags that are set, each with the kinds it applies to.
    fn kind_flags(&self) -> Vec<(&'static str, Vec<Kind>)> {
        let mut set: Vec<(&'static str, Vec<Kind>)> = self.shared.set().into_iter().map(|f| (f, takers(f))).collect();
        if self.omit.is_some() {
            set.push(("--omit", Kind::ALL.into_iter().filter(|k| k.takes_omit()).collect()));
        }
        set.extend(self.kinds.set().into_iter().map(|(f, kind)| (f, vec![kind])));
        set
    }

    /// Whether no flag is set.
    pub fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }

    /// Applies the flags to `p`. A flag of another kind is an error naming it. When anything
    /// changed, the description is rewritten from the result, naming `origin`.
    pub fn apply(&self, p: &mut Profile, origin: &str) -> Result<(), SpecError> {
        let kind = p.kind();
        if let Some((flag, kinds)) = self.kind_flags().into_iter().find(|(_, kinds)| !kinds.contains(&kind)) {
            let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
            return Err(flag_err(
                flag,
                format!("applies to {} tests; this profile's kind is {}", names.join(" and "), kind.name()),
            ));
        }
        if self.is_empty() {
            return Ok(());
        }
        self.apply_probe(p)?;
        let run = &mut p.run;
        set_some(&mut run.duration, self.shared.duration);
        set_some(&mut run.interval, self.interval);
        set_some(&mut run.omit, self.omit);
        set_some(&mut run.cpus, self.cpus.clone());
        let tcp = &mut p.tcp;
        set_some(&mut tcp.window, self.window);
        set_some(&mut tcp.sndbuf, self.sndbuf);
        set_some(&mut tcp.rcvbuf, self.rcvbuf);
        set_some(&mut tcp.mss, self.mss);
        set_some(&mut tcp.congestion, self.congestion.clone());
        if self.nodelay {
            tcp.nodelay = Some(true);
        }
        set_some(&mut tcp.dscp, self.dscp.or(self.tos));
        let (shared, run) = (&self.shared, &mut p.run);
        self.kinds.apply(&mut p.workload, shared, run)?;
        let probes = match &p.run.latency_probe {
            Some(lp) => format!(
                ", with latency probes over {} at {}/s after {} idle",
                lp.protocol.name().to_uppercase(),
                lp.rate(),
                Dur(lp.idle())
            ),
            None => String::new(),
        };
        p.description = format!("{}{probes} ({origin} with command-line overrides)", p.workload.describe(&p.run));
        Ok(())
    }
}

impl Overrides {
    /// `--latency-probe`, `--idle`, `--probe-udp`: the last two change a probe the profile or
    /// the first asks for, and are refused alone.
    fn apply_probe(&self, p: &mut Profile) -> Result<(), SpecError> {
        if self.latency_probe.is_none() && p.run.latency_probe.is_none() {
            if self.idle.is_some() {
                return Err(flag_err("--idle", "sets the latency probes' idle phase: it needs --latency-probe".into()));
            }
            if self.probe_udp {
                return Err(flag_err(
                    "--probe-udp",
                    "sets the latency probes' transport: it needs --latency-probe".into(),
                ));
            }
            return Ok(());
        }
        let lp = p.run.latency_probe.get_or_insert_with(Default::default);
        set_some(&mut lp.rate, self.latency_probe);
        set_some(&mut lp.idle, self.idle);
        if self.probe_udp {
            lp.protocol = super::Protocol::Udp;
        }
        Ok(())
    }
}

/// The kinds that take a shared flag, each asked ([`super::Section::shared_flags`]).
fn takers(flag: &str) -> Vec<Kind> {
    Kind::ALL.into_iter().filter(|k| Workload::default_for(*k).section().shared_flags().contains(&flag)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::flags::parse_rate_range;
    use crate::profile::{RrFlags, WaitMode};

    #[test]
    fn description_follows_the_flags() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let o = Overrides {
            shared: SharedFlags { flows: Some(64), duration: Some("3s".parse().unwrap()), ..Default::default() },
            ..Default::default()
        };
        o.apply(&mut p, &origin).unwrap();
        p.validate("x").unwrap();
        assert!(p.description.contains("64 TCP flows") && p.description.contains("3s"), "{}", p.description);
        assert!(p.description.contains("bulk-1flow"), "{}", p.description);
    }

    #[test]
    fn duration_of_a_sweep_is_each_steps() {
        let (mut p, origin) = Profile::load("http-sweep").unwrap();
        let steps = match &p.workload {
            Workload::Http(h) => h.steps.len(),
            _ => unreachable!(),
        };
        let o = Overrides {
            shared: SharedFlags { duration: Some("2s".parse().unwrap()), ..Default::default() },
            ..Default::default()
        };
        o.apply(&mut p, &origin).unwrap();
        p.validate("x").unwrap();
        assert_eq!(p.workload.time_bound(&p.run), std::time::Duration::from_secs(2 * steps as u64));
        let want = format!("{steps} steps of 2s each");
        assert!(p.description.contains(&want), "{}", p.description);
        assert!(p.description.contains(&format!("{}s in all", 2 * steps)), "{}", p.description);
    }

    #[test]
    fn flags_of_another_kind_name_the_flag() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let o = Overrides {
            kinds: KindFlags { rr: RrFlags { wait: Some(WaitMode::Spin), ..Default::default() }, ..Default::default() },
            ..Default::default()
        };
        let e = o.apply(&mut p, &origin).unwrap_err().to_string();
        assert!(e.contains("--wait") && e.contains("rr") && e.contains("bulk"), "{e}");
        let o =
            Overrides { shared: SharedFlags { rate: Some("5000".into()), ..Default::default() }, ..Default::default() };
        let e = o.apply(&mut p, &origin).unwrap_err().to_string();
        assert!(e.contains("--rate: applies to rr and cps") && e.contains("kind is bulk"), "{e}");
    }

    #[test]
    fn every_shared_flag_is_some_kinds_and_every_kind_names_real_ones() {
        for name in SharedFlags::NAMES {
            assert!(!takers(name).is_empty(), "{name}: no kind takes it");
        }
        for k in Kind::ALL {
            for f in Workload::default_for(k).section().shared_flags() {
                assert!(SharedFlags::NAMES.contains(f), "{}: {f} is not a shared flag", k.name());
            }
        }
        // What `set` can name is what NAMES lists.
        let all = SharedFlags {
            duration: None,
            flows: Some(1),
            reverse: true,
            bidir: true,
            block: Some("1".parse().unwrap()),
            req_size: Some("1".parse().unwrap()),
            resp_size: Some("1".parse().unwrap()),
            udp: true,
            bitrate: Some("1M".parse().unwrap()),
            server_cpus: Some("0".parse().unwrap()),
            rate: Some("1".into()),
            timeout: Some("1s".parse().unwrap()),
            count: Some("1".into()),
            tls: true,
            insecure: true,
            cacert: Some("ca.pem".into()),
            sni: Some("a".into()),
        };
        assert_eq!(all.set(), SharedFlags::NAMES.to_vec());
    }

    #[test]
    fn n_is_a_byte_count_for_bulk_and_a_request_count_for_http() {
        let with = |name: &str, o: Overrides| Overrides::profile(&o, Some(name), None).map(|(p, _)| p);
        let n = |c: &str| Overrides {
            shared: SharedFlags { count: Some(c.into()), ..Default::default() },
            ..Default::default()
        };
        let bulk = with("bulk-1flow", n("1G")).unwrap();
        let Workload::Bulk(b) = &bulk.workload else { panic!("bulk") };
        assert_eq!((b.bytes.map(|b| b.bytes()), bulk.run.duration), (Some(1 << 30), None));
        let http = with("http-max", n("1000")).unwrap();
        assert_eq!(http.workload.http().unwrap().requests, Some(1000));
        let e = with("http-max", n("1G")).unwrap_err().to_string();
        assert!(e.contains("-n") && e.contains("request count"), "{e}");
        let e = with("latency", n("1000")).unwrap_err().to_string();
        assert!(e.contains("-n") && e.contains("applies to bulk and http tests"), "{e}");
        // --blockcount: blocks of -l bytes.
        let mut o = Overrides::default();
        o.kinds.bulk.blockcount = Some(1000);
        o.shared.block = Some("128K".parse().unwrap());
        let p = with("bulk-1flow", o.clone()).unwrap();
        let Workload::Bulk(b) = &p.workload else { panic!("bulk") };
        assert_eq!(b.bytes.map(|b| b.bytes()), Some(1000 * 128 * 1024));
        o.shared.count = Some("1G".into());
        assert!(with("bulk-1flow", o).unwrap_err().to_string().contains("give one"));
    }

    #[test]
    fn bitrate_never_switches_the_protocol() {
        // Found: `-b 1G` on a TCP run became a UDP test without a word. It paces TCP now.
        let b = Overrides {
            shared: SharedFlags { bitrate: Some("1G".parse().unwrap()), ..Default::default() },
            ..Default::default()
        };
        let (mut p, _) = b.profile(None, Some("10.0.0.1")).unwrap();
        assert_eq!(p.kind(), Kind::Bulk);
        assert_eq!(p.workload.bulk_mut().and_then(|b| b.bitrate).map(|r| r.0), Some(1e9));
        let (p, _) = b.profile(Some("bulk-64flows"), None).unwrap();
        assert!(p.description.contains("each paced to"), "{}", p.description);
        let off = Overrides {
            shared: SharedFlags { bitrate: Some("0".parse().unwrap()), ..Default::default() },
            ..Default::default()
        };
        assert_eq!(off.profile(None, Some("10.0.0.1")).unwrap().0.workload.bulk_mut().unwrap().bitrate, None);
        let rr =
            Overrides { shared: SharedFlags { bitrate: b.shared.bitrate, ..Default::default() }, ..Default::default() };
        assert!(rr.profile(Some("latency"), None).unwrap_err().to_string().contains("--bitrate"));
        let u = Overrides { shared: SharedFlags { udp: true, ..b.shared.clone() }, ..b.clone() };
        let (p, _) = u.profile(None, Some("10.0.0.1")).unwrap();
        assert_eq!(p.kind(), Kind::Msgrate);
    }

    #[test]
    fn no_flags_keep_the_description() {
        let (mut p, origin) = Profile::load("bulk-1flow").unwrap();
        let before = p.description.clone();
        Overrides::default().apply(&mut p, &origin).unwrap();
        assert_eq!(p.description, before);
    }

    #[test]
    fn rates_and_ramps_parse() {
        let (a, b) = parse_rate_range("1000..20k").unwrap();
        assert_eq!((a.per_second(), b.unwrap().per_second()), (1000.0, 20000.0));
        assert!(parse_rate_range("fast").is_err());
    }
}
