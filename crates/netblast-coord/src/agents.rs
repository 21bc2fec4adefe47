//! Agent lists as users write them: addresses, files, DNS names, registered groups.
//!
//! - `HOST[:PORT]`, comma separated (port default 5210);
//! - `@FILE`: one entry per line (`#` starts a comment);
//! - `dns:NAME[:PORT]`: every address the name resolves to (a Kubernetes headless Service
//!   resolves to one per pod);
//! - `registered:GROUP:N` (or `registered:N` for the group `default`): wait for N agents of that
//!   group to register (`serve --register COORD --group GROUP`; the coordinator needs `--listen`);
//! - `azure:vmss=NAME,rg=RG[,subscription=ID][,port=PORT]` and `azure:rg=RG,tag=KEY=VALUE[,...]`:
//!   the network interfaces of a scale set, or of a resource group by tag, from Azure Resource
//!   Manager (`netblast-azure`; built with the `azure` feature).

use netblast_spec::plan::{self, DEFAULT_PORT};
use std::net::SocketAddr;

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
pub fn parse(list: &str, what: &str) -> Result<Vec<AgentSource>, String> {
    parse_noted(list, what, &mut Vec::new())
}

/// [`parse`], adding to `notes` what a discovery found, for a person (an `azure:` list says
/// which orchestration mode its scale set has and how many agents it found).
pub fn parse_noted(list: &str, what: &str, notes: &mut Vec<String>) -> Result<Vec<AgentSource>, String> {
    let mut out = Vec::new();
    for item in items(list.split(',')) {
        parse_item(&item, what, &mut out, notes, 0)?;
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

fn parse_item(
    item: &str,
    what: &str,
    out: &mut Vec<AgentSource>,
    notes: &mut Vec<String>,
    depth: usize,
) -> Result<(), String> {
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
                parse_item(&entry, &format!("{what} {path}"), out, notes, depth + 1)?;
            }
        }
        return Ok(());
    }
    if let Some(name) = item.strip_prefix("dns:") {
        let addrs = plan::resolve_all(name, DEFAULT_PORT).map_err(|e| format!("{what}: {e}"))?;
        out.extend(addrs.into_iter().map(AgentSource::Dial));
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
        assert!(parse("dns:localhost:7000", "--servers")
            .unwrap()
            .iter()
            .all(|a| matches!(a, AgentSource::Dial(s) if s.port() == 7000)));
        for bad in ["", "registered:x:0", "registered:web:many", "@/no/such/file", "dns:no-such-host.invalid"] {
            let e = parse(bad, "--clients").unwrap_err();
            assert!(e.starts_with("--clients"), "{bad}: {e}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
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
