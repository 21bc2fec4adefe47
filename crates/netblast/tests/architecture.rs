//! docs/architecture.md against the code: its crate graph against the crates' manifests (`cargo
//! metadata`: every `[dependencies]` edge between workspace crates is drawn, and nothing else; an
//! optional one (a feature) dashed), and its module map against each crate's `src/` (every
//! top-level module named, and nothing else).

use std::collections::BTreeSet;
use std::process::Command;

/// (from, to, optional) of every dependency between workspace crates, from the manifests.
fn manifest_edges() -> BTreeSet<(String, String, bool)> {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--no-deps", "--offline"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .output()
        .expect("cargo metadata runs");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let packages = m["packages"].as_array().unwrap();
    let names: BTreeSet<String> = packages.iter().map(|p| p["name"].as_str().unwrap().to_string()).collect();
    let mut edges = BTreeSet::new();
    for p in packages {
        for d in p["dependencies"].as_array().unwrap() {
            let to = d["name"].as_str().unwrap();
            // Normal dependencies only (dev- and build-dependencies have a kind).
            if names.contains(to) && d["kind"].is_null() {
                let optional = d["optional"].as_bool().unwrap_or(false);
                edges.insert((p["name"].as_str().unwrap().to_string(), to.to_string(), optional));
            }
        }
    }
    edges
}

/// The same, from the mermaid graph in docs/architecture.md: nodes `id[crate-name<br/>…]`,
/// edges `a --> b` and (optional) `a -.->|…| b`.
fn documented_edges(doc: &str) -> BTreeSet<(String, String, bool)> {
    let start = doc.find("```mermaid").expect("a mermaid graph");
    let graph = &doc[start..start + doc[start..].find("\n```\n").expect("the graph ends")];
    let mut crate_of = std::collections::HashMap::new();
    for line in graph.lines() {
        let line = line.trim();
        if let Some((id, rest)) = line.split_once('[') {
            let name = rest.split(['<', ']']).next().unwrap().trim();
            crate_of.insert(id.trim().to_string(), name.to_string());
        }
    }
    let node = |s: &str| -> String {
        let id = s.split('[').next().unwrap().trim();
        crate_of.get(id).cloned().unwrap_or_else(|| panic!("node {id:?} is not declared"))
    };
    let mut edges = BTreeSet::new();
    for line in graph.lines().map(str::trim) {
        if let Some((a, b)) = line.split_once("-.->") {
            let b = b.trim_start().strip_prefix('|').and_then(|b| b.split_once('|')).map_or(b, |(_, b)| b);
            edges.insert((node(a), node(b), true));
        } else if let Some((a, b)) = line.split_once("-->") {
            edges.insert((node(a), node(b), false));
        }
    }
    edges
}

#[test]
fn the_documented_crate_graph_is_the_manifests() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md")).unwrap();
    let (real, drawn) = (manifest_edges(), documented_edges(&doc));
    let missing: Vec<_> = real.difference(&drawn).collect();
    let extra: Vec<_> = drawn.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/architecture.md's graph disagrees with the manifests:\n  not drawn: {missing:?}\n  drawn but not a dependency: {extra:?}"
    );
}

#[test]
fn an_edge_added_without_the_doc_fails_the_check() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md")).unwrap();
    let mut real = manifest_edges();
    // As if a manifest gained a dependency the graph does not draw.
    real.insert(("netblast-report".into(), "netblast-engine".into(), false));
    assert_ne!(real, documented_edges(&doc));
    // And a drawn edge no manifest has is caught too.
    let doc = doc.replacen("```mermaid\n", "```mermaid\n  spec --> report\n", 1);
    assert_ne!(manifest_edges(), documented_edges(&doc));
}

/// Each crate's top-level modules as the files say: `src/x.rs` and `src/x/mod.rs`, less the
/// crate root.
fn module_dirs() -> BTreeSet<(String, String)> {
    let crates = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut out = BTreeSet::new();
    for c in std::fs::read_dir(crates).unwrap() {
        let c = c.unwrap().path();
        let src = c.join("src");
        let Ok(entries) = std::fs::read_dir(&src) else { continue };
        let name = c.file_name().unwrap().to_string_lossy().to_string();
        for e in entries {
            let p = e.unwrap().path();
            let stem = p.file_stem().unwrap().to_string_lossy().to_string();
            let module = if p.is_dir() { p.join("mod.rs").exists() } else { p.extension().is_some_and(|x| x == "rs") };
            if module && stem != "lib" && stem != "main" {
                out.insert((name.clone(), stem));
            }
        }
    }
    out
}

/// The same, from the "Module map" section: lines `- `crate`: `module` (what), …`.
fn documented_modules(doc: &str) -> BTreeSet<(String, String)> {
    let start = doc.find("## Module map").expect("a module map");
    let end = doc[start + 3..].find("\n## ").map_or(doc.len(), |e| start + 3 + e);
    let mut out = BTreeSet::new();
    for line in doc[start..end].lines() {
        let Some(rest) = line.strip_prefix("- `") else { continue };
        let Some((krate, list)) = rest.split_once("`:") else { continue };
        // A module is a backticked name followed by its description in parentheses.
        for piece in list.split("` (").collect::<Vec<_>>().iter().rev().skip(1) {
            let name = piece.rsplit('`').next().unwrap();
            out.insert((krate.to_string(), name.to_string()));
        }
    }
    out
}

#[test]
fn the_module_map_names_every_module() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/architecture.md")).unwrap();
    let (real, named) = (module_dirs(), documented_modules(&doc));
    assert!(real.len() > 40, "the crates' modules were found: {real:?}");
    let missing: Vec<_> = real.difference(&named).collect();
    let extra: Vec<_> = named.difference(&real).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/architecture.md's module map disagrees with the code:\n  not in the map: {missing:?}\n  in the map, not in the code: {extra:?}"
    );
    // A module dropped from the map is caught.
    let doc = doc.replacen("`sweep` (an HTTP sweep's steps), ", "", 1);
    assert_ne!(module_dirs(), documented_modules(&doc));
}

/// The project names no registry host and no path of the machine that built it (issue 56):
/// the scripts derive a mirror from the machine's own apt sources and take sources from
/// variables or clones.
#[test]
fn scripts_name_no_registry_host_and_no_build_machine_path() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut offenders = Vec::new();
    for dir in ["scripts", ".ci", "deploy"] {
        let out = Command::new("git").args(["-C", root, "ls-files", dir]).output().unwrap();
        for file in String::from_utf8_lossy(&out.stdout).lines() {
            let Ok(text) = std::fs::read_to_string(format!("{root}/{file}")) else { continue };
            for (n, line) in text.lines().enumerate() {
                let named = ["deb.debian.org", "archive.ubuntu.com", "/work/.mirror", "/work/main", "/work/shared"];
                if let Some(what) = named.iter().find(|w| line.contains(*w)) {
                    offenders.push(format!("{file}:{}: {what}", n + 1));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "named in the project:\n{}", offenders.join("\n"));
}

/// Where a kind may be matched on (issue 55): the spec's lookup and each kind's section file,
/// the kinds' own verdicts and their lookup (`verdict/`), the report's kind renderers and their
/// lookup (`kinds/`), the engine's generator lookup and each kind's generator. `{}` is each
/// kind's name (`Kind::ALL`): a new kind's files are in the list without an edit here.
const KIND_FILES: [&str; 6] = [
    "crates/netblast-spec/src/profile/workload.rs",
    "crates/netblast-spec/src/profile/{}.rs",
    "crates/netblast-spec/src/verdict/",
    "crates/netblast-report/src/kinds/",
    "crates/netblast-engine/src/kinds/mod.rs",
    "crates/netblast-engine/src/kinds/{}",
];

/// The kinds' variant names, as `Kind::` and `Workload::` spell them.
fn kind_names() -> Vec<String> {
    netblast_spec::profile::Kind::ALL.iter().map(|k| format!("{k:?}")).collect()
}

/// Whether `path` (from the repository's root) is one of [`KIND_FILES`].
fn is_kind_file(path: &str) -> bool {
    KIND_FILES.iter().any(|k| match k.split_once("{}") {
        Some((head, tail)) => {
            netblast_spec::profile::Kind::ALL.iter().any(|n| path.starts_with(&format!("{head}{}{tail}", n.name())))
        }
        None => path == *k || (k.ends_with('/') && path.starts_with(k)),
    })
}

/// Whether a line of code (its comment cut) decides something by a kind: a match arm, a
/// comparison, `matches!` or a `let` pattern on `Kind::X` or `Workload::X`, `is_http()`, or
/// one kind's section read by name (`workload.http()`: ask its `Section`).
/// Building a workload (`Workload::Rr(RrSection { .. })`) is not deciding.
fn decides_by_kind(code: &str) -> bool {
    if ["is_http()", "workload.http()", "workload.http_mut()"].iter().any(|x| code.contains(x)) {
        return true;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    let names = kind_names();
    for ty in ["Kind::", "Workload::"] {
        for (p, _) in code.match_indices(ty) {
            let (before, after) = (&code[..p], &code[p + ty.len()..]);
            if before.ends_with(word) {
                continue;
            }
            let Some(name) =
                names.iter().find(|n| after.starts_with(n.as_str()) && !after[n.len()..].starts_with(word))
            else {
                continue;
            };
            let rest = after[name.len()..].trim_start();
            // A path before the type (`netblast_spec::profile::Kind::Bulk`) is part of its name.
            let before = before.trim_end_matches(|c: char| word(c) || c == ':').trim_end();
            if after.contains("=>")
                || before.ends_with("==")
                || before.ends_with("!=")
                || rest.starts_with("==")
                || rest.starts_with("!=")
                || before.ends_with("let")
                || code.contains("matches!(")
            {
                return true;
            }
        }
    }
    false
}

#[test]
fn the_kind_detector_sees_each_way_of_deciding_by_kind() {
    for decides in [
        "        Kind::Bulk => 1,",
        "        Workload::Http(h) => h.urls.len(),",
        "    if kind == Kind::Msgrate {",
        "    (kind != Kind::Bulk).then(|| kind.unit())",
        "    if Kind::Rr == kind {",
        "    let Workload::Cps(c) = &p.workload else { return };",
        "    if let Workload::Bulk(b) = w {",
        "    let tcp = matches!(w, crate::profile::Workload::Bulk(_));",
        "    if p.workload.is_http() {",
        "    if x == netblast_spec::profile::Kind::Bulk {",
    ] {
        assert!(decides_by_kind(decides), "{decides}");
    }
    for builds in [
        "        workload: Workload::Rr(RrSection { rate: None, ..Default::default() }),",
        "    Kind::ALL.iter().filter(|k| k.takes_omit())",
        "    x => Workload::Bulk(b),",
        "    match e.kind() { io::ErrorKind::Other => 1 }",
        "    let k = HttpKind::Bulk;",
    ] {
        assert!(!decides_by_kind(builds), "{builds}");
    }
    assert!(is_kind_file("crates/netblast-engine/src/kinds/http/worker.rs"));
    assert!(is_kind_file("crates/netblast-spec/src/profile/rr.rs"));
    assert!(!is_kind_file("crates/netblast-spec/src/profile/overrides.rs"));
    assert!(!is_kind_file("crates/netblast-engine/src/kinds/flow.rs"));
}

/// Calls `f(file, line number, code)` for each line of the repository's files matching `glob`
/// (from the root, as `git ls-files` takes it), before the file's first `#[cfg(test)]` and with
/// `//` comments cut; at least `least` files, or the glob is wrong.
fn for_code_lines(glob: &str, least: usize, mut f: impl FnMut(&str, usize, &str)) {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let out = Command::new("git").args(["-C", root, "ls-files", glob]).output().unwrap();
    let files: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect();
    assert!(files.len() > least, "{} files match {glob}", files.len());
    for file in &files {
        let text = std::fs::read_to_string(format!("{root}/{file}")).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap();
        for (n, line) in code.lines().enumerate() {
            f(file, n + 1, line.split("//").next().unwrap());
        }
    }
}

/// Outside the kinds' own files and their lookups ([`KIND_FILES`]), no code decides by a kind:
/// what differs between kinds is asked of the kind (`Section`, `Kind`), so a new kind cannot be
/// missed by an arm that catches "the rest". Test code (after `#[cfg(test)]`) may name kinds.
#[test]
fn no_code_outside_the_kind_files_decides_by_kind() {
    let mut offenders = Vec::new();
    for_code_lines("crates/*/src/*.rs", 50, |file, n, line| {
        if !is_kind_file(file) && decides_by_kind(line) {
            offenders.push(format!("{file}:{n}: {}", line.trim()));
        }
    });
    assert!(
        offenders.is_empty(),
        "decided by kind outside the kinds' files (ask the kind: Section or Kind):\n{}",
        offenders.join("\n")
    );
}

/// The report reaches a kind's renderer only through its lookup (`kinds::for_kind`, or
/// `kinds::of` a result), never a kind's file by name: a kind's part of the report is its
/// `KindReport` and nothing else. Test code may name them.
#[test]
fn the_report_reaches_a_kind_only_through_its_lookup() {
    let lookups = ["for_kind(", "of(", "KindReport"];
    let mut offenders = Vec::new();
    for_code_lines("crates/netblast-report/src/*.rs", 10, |file, n, line| {
        if file.starts_with("crates/netblast-report/src/kinds/") {
            return;
        }
        for (p, _) in line.match_indices("kinds::") {
            if !lookups.iter().any(|l| line[p + "kinds::".len()..].starts_with(l)) {
                offenders.push(format!("{file}:{n}: {}", line.trim()));
            }
        }
    });
    assert!(
        offenders.is_empty(),
        "a kind's report file named outside report/src/kinds/ (ask kinds::for_kind):\n{}",
        offenders.join("\n")
    );
}
