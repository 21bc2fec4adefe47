//! Agent lists as users write them: addresses, files, DNS names, registered groups.
//!
//! - `HOST[:PORT]`, comma separated (port default 5210);
//! - `@FILE`: one entry per line (`#` starts a comment);
//! - `dns:NAME[:PORT]`: every address the name resolves to (a Kubernetes headless Service
//!   resolves to one per pod);
//! - `registered:GROUP:N` (or `registered:N` for the group `default`): wait for N agents of that
//!   group to register (`serve --register COORD --group GROUP`; the coordinator needs `--listen`).

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
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        parse_item(item, what, &mut out, 0)?;
    }
    if out.is_empty() {
        return Err(format!("{what}: names no agent"));
    }
    Ok(out)
}

fn parse_item(item: &str, what: &str, out: &mut Vec<AgentSource>, depth: usize) -> Result<(), String> {
    if let Some(path) = item.strip_prefix('@') {
        if depth > 0 {
            return Err(format!("{what}: {path}: a file may not name another file"));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("{what}: cannot read {path}: {e}"))?;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            for entry in line.split([',', ' ', '\t']).filter(|e| !e.is_empty()) {
                parse_item(entry, &format!("{what} {path}"), out, depth + 1)?;
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
}
