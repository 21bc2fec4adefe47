//! Agent lists as users write them: addresses, files, DNS names, registered groups.
//!
//! - `HOST[:PORT]`, comma separated (port default 5210);
//! - `@FILE`: one entry per line (`#` starts a comment);
//! - `dns:NAME[:PORT][=N]`: every address the name resolves to (a Kubernetes headless Service
//!   resolves to one per ready pod); while it resolves to none (or to fewer than N), it is asked
//!   again until `--wait-agents` runs out, so a Job started beside its agents waits for them;
//! - `registered:GROUP:N` (or `registered:N` for the group `default`): wait for N agents of that
//!   group to register (`serve --register COORD --group GROUP`; the coordinator needs `--listen`);
//! - `azure:vmss=NAME,rg=RG[,subscription=ID][,port=PORT]` and `azure:rg=RG,tag=KEY=VALUE[,...]`:
//!   the network interfaces of a scale set, or of a resource group by tag, from Azure Resource
//!   Manager (`netblast-azure`; built with the `azure` feature).

use netblast_spec::plan::{self, DEFAULT_PORT};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Where agents come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentSource {
    /// An agent to dial.
    Dial(SocketAddr),
    /// Agents that register themselves.
    Registered {
        /// Their group.
        group: String,
        /// How many to wait for.
        count: usize,
    },
}

/// Parses an agent list; `what` names the flag in errors (`--clients`).
/// A `dns:` name is asked once.
pub fn parse(list: &str, what: &str) -> Result<Vec<AgentSource>, String> {
    parse_noted(list, what, &mut Vec::new(), Duration::ZERO)
}

/// [`parse`], adding to `notes` what a discovery found, for a person (an `azure:` list says
/// which orchestration mode its scale set has and how many agents it found); a `dns:` name that
/// resolves to no address, or to fewer than it asks for, is asked again for up to `wait`.
pub fn parse_noted(
    list: &str,
    what: &str,
    notes: &mut Vec<String>,
    wait: Duration,
) -> Result<Vec<AgentSource>, String> {
    let mut out = Vec::new();
    let ctx = Ctx { what, wait, deadline: Instant::now() + wait };
    for item in items(list.split(',')) {
        parse_item(&item, &ctx, &mut out, notes, 0)?;
    }
    if out.is_empty() {
        return Err(format!("{what}: names no agent"));
    }
    Ok(out)
}

/// The entries of a list: an `azure:` entry goes on over the commas that separate its keys.
fn items<'a>(tokens: impl Iterator<Item = &'a str>) -> Vec<String> {
    const AZURE_KEYS: [&str; 5] = ["vmss=", "rg=", "tag=", "subscription=", "port="];
    let mut out: Vec<String> = Vec::new();
    let mut in_azure = false;
    for t in tokens.map(str::trim).filter(|t| !t.is_empty()) {
        if in_azure && AZURE_KEYS.iter().any(|k| t.starts_with(k)) {
            if let Some(last) = out.last_mut() {
                last.push(',');
                last.push_str(t);
                continue;
            }
        }
        in_azure = t.starts_with("azure:");
        out.push(t.to_string());
    }
    out
}

#[cfg(feature = "azure")]
fn azure(query: &str, what: &str, out: &mut Vec<AgentSource>, notes: &mut Vec<String>) -> Result<(), String> {
    let q = netblast_azure::Query::parse(query).map_err(|e| format!("{what}: {e}"))?;
    let opts = netblast_azure::Options::from_env().map_err(|e| format!("{what}: {e}"))?;
    let found = netblast_azure::discover_blocking(&q, &opts).map_err(|e| format!("{what}: {e}"))?;
    notes.push(format!("{what}: azure: {}", found.note));
    out.extend(found.agents.into_iter().map(AgentSource::Dial));
    Ok(())
}

#[cfg(not(feature = "azure"))]
fn azure(query: &str, what: &str, _out: &mut Vec<AgentSource>, _notes: &mut Vec<String>) -> Result<(), String> {
    Err(format!(
        "{what}: azure:{query}: this netblast was built without Azure discovery; build it with \
         `cargo build --release -p netblast --features azure`"
    ))
}

/// What every entry of one list shares: the flag's name, and how long a `dns:` name may take.
struct Ctx<'a> {
    what: &'a str,
    wait: Duration,
    deadline: Instant,
}

/// The addresses of `dns:NAME[:PORT][=N]`, asked until there are any (N of them with `=N`) or
/// the deadline passes. Only a failed lookup is asked again: a malformed entry fails at once.
fn dns(entry: &str, ctx: &Ctx) -> Result<Vec<SocketAddr>, String> {
    let what = ctx.what;
    let (name, want) = match entry.rsplit_once('=') {
        Some((name, n)) => match n.parse::<usize>() {
            Ok(n) if n > 0 => (name, n),
            _ => return Err(format!("{what}: dns:{entry}: expected dns:NAME[:PORT][=COUNT] with COUNT > 0")),
        },
        None => (entry, 1),
    };
    loop {
        let why = match plan::resolve_all(name, DEFAULT_PORT) {
            Ok(a) if a.len() >= want => return Ok(a),
            Ok(a) => format!("{} of the {want} addresses asked for", a.len()),
            Err(e) => {
                let e = e.to_string();
                // Not yet in the name service (a headless Service before its pods are ready).
                if !(e.contains("cannot resolve") || e.contains("no address")) {
                    return Err(format!("{what}: {e}"));
                }
                e
            }
        };
        if Instant::now() >= ctx.deadline {
            return Err(format!("{what}: dns:{entry}: {why} (asked for {:?}; --wait-agents)", ctx.wait));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn parse_item(
    item: &str,
    ctx: &Ctx,
    out: &mut Vec<AgentSource>,
    notes: &mut Vec<String>,
    depth: usize,
) -> Result<(), String> {
    let what = ctx.what;
    if let Some(query) = item.strip_prefix("azure:") {
        return azure(query, what, out, notes);
    }
    if let Some(path) = item.strip_prefix('@') {
        if depth > 0 {
            return Err(format!("{what}: {path}: a file may not name another file"));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read {path}: {e}"))?;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            for entry in items(line.split([',', ' ', '\t'])) {
                let what = format!("{what} {path}");
                parse_item(&entry, &Ctx { what: &what, ..*ctx }, out, notes, depth + 1)?;
            }
        }
        return Ok(());
    }
    if let Some(entry) = item.strip_prefix("dns:") {
        out.extend(dns(entry, ctx)?.into_iter().map(AgentSource::Dial));
        return Ok(());
    }
    if let Some(rest) = item.strip_prefix("registered:") {
        let (group, n) = match rest.rsplit_once(':') {
            Some((g, n)) => (g.to_string(), n),
            None => ("default".to_string(), rest),
        };
        let count: usize = n.parse().map_err(|_| format!("{what}: {item:?}: expected registered:GROUP:COUNT"))?;
        if count == 0 || group.is_empty() {
            return Err(format!("{what}: {item:?}: expected registered:GROUP:COUNT with COUNT > 0"));
        }
        out.push(AgentSource::Registered { group, count });
        return Ok(());
    }
    let a = plan::resolve_target(item, DEFAULT_PORT).map_err(|e| format!("{what}: {e}"))?;
    out.push(AgentSource::Dial(a));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_files_dns_and_groups() {
        let dir = std::env::temp_dir().join(format!("nb-agents-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("clients.txt");
        std::fs::write(&f, "# the client scale set\n127.0.0.2\n127.0.0.3:6000  # two\n").unwrap();
        let l = parse(&format!("127.0.0.1,@{},registered:web:3,registered:2", f.display()), "--clients").unwrap();
        assert_eq!(
            l,
            vec![
                AgentSource::Dial("127.0.0.1:5210".parse().unwrap()),
                AgentSource::Dial("127.0.0.2:5210".parse().unwrap()),
                AgentSource::Dial("127.0.0.3:6000".parse().unwrap()),
                AgentSource::Registered { group: "web".into(), count: 3 },
                AgentSource::Registered { group: "default".into(), count: 2 },
            ]
        );
        assert!(
            parse("dns:localhost:7000", "--servers")
                .unwrap()
                .iter()
                .all(|a| matches!(a, AgentSource::Dial(s) if s.port() == 7000))
        );
        for bad in ["", "registered:x:0", "registered:web:many", "@/no/such/file", "dns:no-such-host.invalid"] {
            let e = parse(bad, "--clients").unwrap_err();
            assert!(e.starts_with("--clients"), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_dns_name_is_asked_again_until_it_has_the_addresses_asked_for() {
        let one = "dns:127.0.0.1:7000=1";
        assert_eq!(parse(one, "--servers").unwrap(), vec![AgentSource::Dial("127.0.0.1:7000".parse().unwrap())]);
        for bad in ["dns:127.0.0.1:7000=0", "dns:127.0.0.1:7000=many"] {
            let e = parse(bad, "--servers").unwrap_err();
            assert!(e.contains("COUNT > 0"), "{bad}: {e}");
        }
        // An address is one address: asking for two waits out the wait, then says how many.
        let t0 = Instant::now();
        let e = parse_noted("dns:127.0.0.1:7000=2", "--servers", &mut vec![], Duration::from_millis(1200)).unwrap_err();
        assert!(t0.elapsed() >= Duration::from_millis(1200), "{:?}", t0.elapsed());
        assert!(e.contains("1 of the 2 addresses asked for") && e.contains("--wait-agents"), "{e}");
        // A malformed entry fails at once, however long the wait.
        let t0 = Instant::now();
        let e = parse_noted("dns:x:99999", "--servers", &mut vec![], Duration::from_secs(60)).unwrap_err();
        assert!(t0.elapsed() < Duration::from_secs(1) && e.contains("99999"), "{e}");
    }

    #[test]
    fn an_azure_entry_keeps_its_keys_across_commas() {
        let split = |l: &str| items(l.split(','));
        assert_eq!(
            split("127.0.0.1,azure:vmss=c,rg=perf,port=7000,10.0.0.1,azure:rg=perf,tag=role=server"),
            ["127.0.0.1", "azure:vmss=c,rg=perf,port=7000", "10.0.0.1", "azure:rg=perf,tag=role=server"]
        );
        // In a file, spaces separate entries too.
        assert_eq!(items("azure:vmss=c rg=perf  10.0.0.1".split([',', ' '])), ["azure:vmss=c,rg=perf", "10.0.0.1"]);
    }

    #[cfg(not(feature = "azure"))]
    #[test]
    fn without_the_feature_an_azure_list_says_how_to_build_it() {
        let e = parse("azure:vmss=c,rg=perf", "--clients").unwrap_err();
        assert!(e.starts_with("--clients: azure:vmss=c,rg=perf") && e.contains("--features azure"), "{e}");
    }
}
