//! Every command README.md and docs/*.md show runs, in a short form, against local peers: a
//! command the docs show is a promise.
//!
//! Each ```sh block is read statement by statement (a `\` line joined to the next, a trailing
//! `# comment` dropped, a `for … done` loop one statement). A statement is either run or
//! excused by a rule below that says why and where else it runs; a statement no rule covers
//! fails the check, so a new documented command is run or excused on purpose.
//!
//! What a run changes, and only that: the placeholders become this host's peers (`HOST`, `H`
//! and the documents' agent addresses a local `netblast serve` and token agents on loopback,
//! `FW-VIP` nginx's rate-limited `/limited`, `F` and `/etc/netblast.token` a token file), a
//! `-t` over 2 s becomes 2 s, `--ramp` 1 s, `-O` 1 s, and a `run` or `fleet` given no length
//! gets `-t 2s` (a `netblast` on the statement's PATH adds it), a `campaign` `--set duration=1s
//! --repeats 2`; `serve` runs until it listens
//! and then gets SIGTERM. Statements run in the documents' order in one directory, so a
//! `report result.json` reads the result an earlier command wrote; an input no command wrote
//! is a copy of the first result written, and `--start-at … -o a.json` ("on several hosts")
//! runs twice at once, the twin writing `b.json`. A statement passes when it exits 0 (0 or 4
//! with `--assert`: a threshold's verdict is a measurement's), prints no panic, and every file
//! it names with `-o`, `--html` or `--hlog` exists and is not empty.
//!
//! README's first line runs its demo (`./scripts/demo.sh`, 10 s); its set-up is CI's own first
//! step. `NETBLAST_DOC_LONG=1` also runs the scripts the docs show (comparisons, floors: minutes
//! each), as written.

// Shared with the other test binaries; this one uses part of it.
#[allow(dead_code, unused_imports)]
mod util;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// A statement of a document: where it is and what it says.
#[derive(Debug, Clone)]
struct Statement {
    at: String,
    text: String,
}

/// Statements not run here, each with why, matched by a piece of their text.
const EXCUSED: &[(&str, &str)] = &[
    ("KUBECONFIG=", "needs the cluster k8s-cluster.sh starts: tests/k8s_nodes.rs"),
    ("kubectl ", "needs a cluster: tests/k8s_nodes.rs runs deploy/k8s on real nodes"),
    ("scripts/image.py", "the k8s test builds both images with it (tests/k8s_nodes.rs)"),
    (
        "scripts/k8s-cluster.sh",
        "root and a minute: the k8s test starts and removes the cluster with it (tests/k8s_nodes.rs)",
    ),
    ("deploy/k8s/token", "part of the cluster steps: tests/k8s.rs"),
    ("scripts/k8s-paths.sh", "needs a cluster: tests/k8s_nodes.rs (paths) runs it on real nodes, with shorter runs"),
    ("azure:", "needs Azure: tests/fleet.rs (agents_found_in_azure_take_part) runs it against a fake Resource Manager"),
    ("scripts/testbed.sh", "root and namespaces: tests/fleet.rs (Testbed) runs it for every namespace fleet"),
    ("${A[", "uses the testbed's agents: tests/fleet.rs (Testbed)"),
    ("T=$(sed", "reads the testbed's output: tests/fleet.rs (Testbed)"),
    ("./scripts/test.sh", "the suite itself"),
    ("scripts/test.sh --repeat", "the flake finder: the suite N times"),
    ("scripts/flakes.sh", "the flake finder: the suite N times"),
    ("cargo bench -- truth.", "scripts/test.sh runs the truth checks"),
    ("cargo bench -- fleet", "scripts/test.sh runs it"),
    (
        "cargo bench",
        "the whole self-check takes minutes: run by hand (scripts/test.sh runs its truth checks and fleet figures)",
    ),
    ("scripts/", "minutes: NETBLAST_DOC_LONG=1 runs it as written"),
];

/// The statements of the ```sh blocks of `text` (document `name`).
fn statements(name: &str, text: &str) -> Vec<Statement> {
    let mut out = Vec::new();
    let (mut fence, mut sh, mut more) = (false, false, false);
    let (mut lines, mut start, mut depth): (Vec<String>, usize, i32) = (Vec::new(), 0, 0);
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if t.starts_with("```") {
            fence = !fence;
            sh = fence && matches!(t.trim_start_matches('`').trim(), "sh" | "bash");
            continue;
        }
        let code = strip_comment(line);
        let code = code.trim();
        if !sh || code.is_empty() {
            continue;
        }
        if lines.is_empty() {
            start = i + 1;
        }
        let (code, next_joins) = match code.strip_suffix('\\') {
            Some(c) => (c.trim_end(), true),
            None => (code, false),
        };
        for w in code.split(|c: char| c.is_whitespace() || c == ';') {
            depth += match w {
                "for" | "while" => 1,
                "done" => -1,
                _ => 0,
            };
        }
        match lines.last_mut() {
            Some(last) if more => {
                last.push(' ');
                last.push_str(code);
            }
            _ => lines.push(code.to_string()),
        }
        more = next_joins;
        if !more && depth <= 0 {
            out.push(Statement { at: format!("{name}:{start}"), text: join(&lines) });
            (lines, depth) = (Vec::new(), 0);
        }
    }
    out
}

/// A loop's lines as one: `;` between them, except after a word that takes what follows.
fn join(lines: &[String]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        out.push_str(l);
        if i + 1 < lines.len() {
            let open = ["do", "then", "&&", "||", "|", "{"].iter().any(|w| l.ends_with(w));
            out.push_str(if open { " " } else { "; " });
        }
    }
    out
}

/// `line` less a `# comment` that starts a word outside quotes.
fn strip_comment(line: &str) -> String {
    let (mut single, mut double, mut prev) = (false, false, ' ');
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && prev.is_whitespace() => return line[..i].to_string(),
            _ => {}
        }
        prev = c;
    }
    line.to_string()
}

/// The local peers the placeholders become.
struct Peers {
    dir: PathBuf,
    shim: PathBuf,
    token: PathBuf,
    port: u16,
    http: u16,
    https: u16,
    nginx: Option<u16>,
    agents: Vec<String>,
    _keep: Vec<util::KillOnDrop>,
    _nginx: Option<netblast_testkit::Nginx>,
}

fn unix_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Peers {
    fn up(dir: &Path) -> Peers {
        // One set of peers at a time: the ports picked free stay free until their server binds.
        util::lane();
        std::fs::create_dir_all(dir).unwrap();
        let token = util::token_file("doc-commands", "a token the documents' commands share");
        let (http, https) = (free_port(), free_port());
        let (serve, addr) = util::spawn_server_with(&["--http", &http.to_string(), "--https", &https.to_string()]);
        let mut keep = vec![util::KillOnDrop(serve)];
        let mut agents = Vec::new();
        for i in 0..4 {
            // The server agents answer HTTP too, as the documents' deployments start them.
            let http: &[&str] = if i >= 2 { &["--http", "0", "--https", "0"] } else { &[] };
            let mut args = vec!["--probe", "tcpinfo", "--token-file", token.to_str().unwrap()];
            args.extend_from_slice(http);
            let (a, at) = util::spawn_server_with(&args);
            keep.push(util::KillOnDrop(a));
            agents.push(at.to_string());
        }
        let nginx = util::nginx_limited("2000r/s").map(|n| (n.http, n));
        // `netblast` on the statements' PATH: the binary under test, a run or fleet given no
        // length bounded to 2 s.
        let shim = dir.join("bin");
        std::fs::create_dir_all(&shim).unwrap();
        let script = format!(
            "#!/bin/bash\ncase \"$1\" in run|fleet)\n  case \" $* \" in *\" -t \"*|*\" --duration \"*|*\" --find-max\"*|*\" -n \"*|*\" --requests \"*) ;;\n  \
             *) set -- \"$@\" -t 2s ;; esac ;;\ncampaign) set -- \"$@\" --set duration=1s --repeats 2 ;; esac\nexec {} \"$@\"\n",
            env!("CARGO_BIN_EXE_netblast")
        );
        // The documents' paths into the repository (`configs/campaigns/…`) read from here too.
        let configs = dir.join("configs");
        if !configs.exists() {
            std::os::unix::fs::symlink(concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs"), &configs).unwrap();
        }
        let path = shim.join("netblast");
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        Peers {
            dir: dir.to_path_buf(),
            shim,
            token,
            port: addr.port(),
            http,
            https,
            nginx: nginx.as_ref().map(|(p, _)| *p),
            agents,
            _keep: keep,
            _nginx: nginx.map(|(_, n)| n),
        }
    }

    /// `text` with its placeholders made this host's peers and its lengths shortened; `None`
    /// with why when it needs a peer this host lacks.
    fn localize(&self, text: &str) -> Result<String, String> {
        let a = &self.agents;
        let target = format!("127.0.0.1:{}", self.port);
        let token = self.token.display().to_string();
        let mut t = text.to_string();
        // SAFETY: geteuid has no preconditions.
        if t.contains("--probe ebpf") && unsafe { libc::geteuid() } != 0 {
            return Err("the eBPF probe needs root".into());
        }
        if t.contains("FW-VIP") {
            let Some(n) = self.nginx else { return Err("nginx is not installed".into()) };
            t = t.replace("http://FW-VIP/", &format!("http://127.0.0.1:{n}/limited"));
        }
        for (from, to) in [
            ("https://HOST:8443/", format!("https://127.0.0.1:{}/", self.https)),
            ("http://HOST:8080/", format!("http://127.0.0.1:{}/", self.http)),
            ("HOST:8080", format!("127.0.0.1:{}", self.http)),
            ("HOST:8443", format!("127.0.0.1:{}", self.https)),
            ("--target HOST", format!("--target {target}")),
            ("--target H ", format!("--target {target} ")),
            ("run HOST -p 5201", format!("run 127.0.0.1 -p {}", self.port)),
            ("-c HOST -4", format!("-c 127.0.0.1 -p {} -4", self.port)),
            ("-B 10.0.0.4 --bind-dev vxlan0", "-B 127.0.0.1 --bind-dev lo".into()),
            ("-B 10.0.0.4,10.0.0.5", "-B 127.0.0.1,127.0.0.2".into()),
            ("--allow 10.1.0.0/16", "--allow 127.0.0.0/8".into()),
            ("--clients A,B", format!("--clients {},{}", a[0], a[1])),
            ("--servers C,D", format!("--servers {},{}", a[2], a[3])),
            ("10.1.1.4,10.1.1.5", format!("{},{}", a[0], a[1])),
            ("10.1.2.4,10.1.2.5", format!("{},{}", a[2], a[3])),
            ("/etc/netblast.token", token.clone()),
            ("--token-file F", format!("--token-file {token}")),
            ("--http 8080 --https 8443", format!("--http {} --https {}", free_port(), free_port())),
            ("--metrics 127.0.0.1:9464", format!("--metrics 127.0.0.1:{}", free_port())),
            // One instant for both hosts, 4 s ahead (Unix seconds).
            ("--start-at 2026-11-23T10:00:00Z", format!("--start-at {}", unix_s() + 4)),
        ] {
            t = t.replace(from, &to);
        }
        Ok(shorten(&t))
    }
}

/// `-t` over 2 s as 2 s, `--ramp` as 1 s, `-O` as 1 s.
fn shorten(text: &str) -> String {
    let words: Vec<&str> = text.split(' ').collect();
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    for (i, w) in words.iter().enumerate() {
        let prev = if i > 0 { words[i - 1] } else { "" };
        let secs = w.parse::<netblast_spec::units::Dur>().ok().map(|d| d.get().as_secs_f64()).filter(|_| !w.is_empty());
        out.push(match (prev, secs) {
            ("-t", Some(s)) if s > 2.0 => "2s".into(),
            ("--ramp" | "-O", Some(_)) => "1s".into(),
            _ => w.to_string(),
        });
    }
    out.join(" ")
}

/// The files a statement names as its outputs.
fn outputs(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "-o" | "--html" | "--hlog"))
        .map(|w| w[1].trim_matches('"').to_string())
        .collect()
}

/// Inputs of `report` and `merge` that no statement wrote: copies of the first result written.
fn provide_inputs(dir: &Path, text: &str) {
    let words: Vec<&str> = text.split_whitespace().collect();
    if !matches!(words.get(1), Some(&"report") | Some(&"merge")) || text.contains("$") {
        return;
    }
    let Some(first) = ["result.json", "off.json", "a.json"].iter().map(|f| dir.join(f)).find(|p| p.exists()) else {
        return;
    };
    for w in words.iter().skip(2).filter(|w| w.ends_with(".json") && !w.starts_with('-')) {
        let p = dir.join(w);
        if !p.exists() && !outputs(text).iter().any(|o| o == w) {
            std::fs::copy(&first, &p).unwrap();
        }
    }
}

/// Runs one localized statement in `peers.dir`; why it failed, if it did.
fn run_one(peers: &Peers, text: &str) -> Result<(), String> {
    let bash = |t: &str| {
        let mut c = Command::new("bash");
        // -e: a loop fails at its first failing command, not only at its last.
        c.args(["-e", "-c", t]).current_dir(&peers.dir);
        let path = format!("{}:{}", peers.shim.display(), std::env::var("PATH").unwrap_or_default());
        c.env("PATH", path);
        c.env(
            "L",
            format!(
                "--clients {},{} --servers {},{} --token-file {}",
                peers.agents[0],
                peers.agents[1],
                peers.agents[2],
                peers.agents[3],
                peers.token.display()
            ),
        );
        c
    };
    if text.starts_with("netblast serve") {
        let extra = if text.contains("--port") { "" } else { " --port 0" };
        let mut child =
            bash(&format!("exec {text}{extra}")).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        std::thread::sleep(Duration::from_secs(2));
        if let Ok(Some(st)) = child.try_wait() {
            let o = child.wait_with_output().unwrap();
            return Err(format!("exited {st} before it was stopped: {}", String::from_utf8_lossy(&o.stderr)));
        }
        // SAFETY: kill with our own child's pid and a valid signal.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let o = util::wait_output(child, Duration::from_secs(10));
        let err = String::from_utf8_lossy(&o.stderr);
        return match (o.status.code(), err.contains("listening on")) {
            (Some(0), true) => Ok(()),
            _ => Err(format!("exit {:?}, said: {err}", o.status.code())),
        };
    }
    provide_inputs(&peers.dir, text);
    let twin = text.contains("--start-at") && text.contains("-o a.json");
    let twin = twin.then(|| {
        bash(&text.replace("-o a.json", "-o b.json")).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap()
    });
    let child = bash(text).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let o = util::wait_output(child, Duration::from_secs(300));
    if let Some(t) = twin {
        let o = util::wait_output(t, Duration::from_secs(60));
        if !o.status.success() {
            return Err(format!(
                "its twin (-o b.json) exited {:?}: {}",
                o.status.code(),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    let said = util::said(&o);
    let allowed: &[i32] = if text.contains("--assert") { &[0, 4] } else { &[0] };
    if !o.status.code().is_some_and(|c| allowed.contains(&c)) || said.contains("panicked") {
        let tail: String =
            said.lines().rev().take(8).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
        return Err(format!("exit {:?}, said:\n{tail}", o.status.code()));
    }
    for f in outputs(text).iter().filter(|f| !f.contains('$')) {
        let len = std::fs::metadata(peers.dir.join(f)).map(|m| m.len()).unwrap_or(0);
        if len == 0 {
            return Err(format!("wrote no {f}"));
        }
    }
    Ok(())
}

/// `./scripts/demo.sh` as README's first line runs it (after `./scripts/setup.sh`): the main
/// job against a local `netblast serve`.
fn demo() -> Result<(), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut demo = Command::new("./scripts/demo.sh");
    // As from a user's shell: without the variables `cargo test` sets for this test. ring's
    // build script reruns when CARGO_MANIFEST_DIR changes, so with them the demo's `cargo
    // build --release` rebuilt rustls and everything above it (5.5 minutes of CI).
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy().into_owned();
        if (k.starts_with("CARGO") && k != "CARGO_HOME" && k != "CARGO_TARGET_DIR")
            || k == "RUST_RECURSION_COUNT"
            || k == "LD_LIBRARY_PATH"
        {
            demo.env_remove(k);
        }
    }
    let child = demo.current_dir(&root).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
    let o = util::wait_output(child.map_err(|e| e.to_string())?, Duration::from_secs(600));
    let said = util::said(&o);
    match (o.status.code(), said.contains("verdict:")) {
        (Some(0), true) => Ok(()),
        _ => Err(format!("exit {:?}, said: {said}", o.status.code())),
    }
}

/// What became of each statement of `docs`: `(where, statement, Ok(how) or Err(why))`.
fn check(docs: &[(String, String)], peers: &Peers, long: bool) -> Vec<(String, String, Result<String, String>)> {
    let mut out = Vec::new();
    for (name, text) in docs {
        for s in statements(name, text) {
            let excused = EXCUSED.iter().find(|(m, _)| s.text.contains(m)).map(|(_, why)| *why);
            let script =
                s.text.starts_with("scripts/") || s.text.starts_with("CONGESTION=") || s.text.starts_with("sudo ");
            // README's first command: the set-up is CI's own first step; the demo runs here.
            if s.text.contains("./scripts/demo.sh") {
                out.push((s.at.clone(), s.text.clone(), demo().map(|()| "ran: ./scripts/demo.sh".to_string())));
                continue;
            }
            let verdict = match excused {
                Some(why) if !(long && script) => Ok(format!("excused: {why}")),
                _ if s.text.starts_with("netblast ") || s.text.starts_with("for ") || (long && script) => {
                    match peers.localize(&s.text) {
                        Err(why) => Ok(format!("skipped: {why}")),
                        Ok(t) => run_one(peers, &t).map(|()| format!("ran: {t}")),
                    }
                }
                _ => Err("no rule runs or excuses it (a new command: run it here, or excuse it with why)".into()),
            };
            out.push((s.at, s.text, verdict));
        }
    }
    out
}

fn documents() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|p| {
            let name = p.strip_prefix(&root).unwrap_or(&p).display().to_string();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect()
}

fn work_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nb-doc-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn every_documented_command_runs() {
    let dir = work_dir("all");
    let peers = Peers::up(&dir);
    let long = std::env::var("NETBLAST_DOC_LONG").is_ok_and(|v| v == "1");
    let results = check(&documents(), &peers, long);
    let mut failed = Vec::new();
    for (at, text, v) in &results {
        match v {
            Ok(how) => eprintln!("ok    {at}: {}", how.chars().take(160).collect::<String>()),
            Err(why) => {
                eprintln!("FAIL  {at}: {text}\n      {why}");
                failed.push(format!("{at}: {text}\n  {why}"));
            }
        }
    }
    let ran = results.iter().filter(|(_, _, v)| v.as_ref().is_ok_and(|h| h.starts_with("ran"))).count();
    assert!(ran >= 40, "only {ran} documented commands ran");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&peers.token);
    assert!(failed.is_empty(), "{} documented commands failed:\n{}", failed.len(), failed.join("\n"));
}

#[test]
fn a_broken_command_and_an_unknown_one_fail_the_check() {
    let dir = work_dir("broken");
    let peers = Peers::up(&dir);
    let doc = "```sh\nnetblast run --target HOST -t 1 -q   # fine\nnetblast run --target HOST --no-such-flag\n\
               netblast frobnicate \\\n    --target HOST\nrm -rf /tmp/whatever\n```\n";
    let results = check(&[("BROKEN.md".into(), doc.into())], &peers, false);
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&peers.token);
    let verdicts: Vec<(&str, bool)> = results.iter().map(|(at, _, v)| (at.as_str(), v.is_ok())).collect();
    assert_eq!(
        verdicts,
        [("BROKEN.md:2", true), ("BROKEN.md:3", false), ("BROKEN.md:4", false), ("BROKEN.md:6", false)]
    );
    let why = results[1].2.as_ref().unwrap_err();
    assert!(why.contains("exit Some(2)") && why.contains("--no-such-flag"), "{why}");
    assert!(results[3].2.as_ref().unwrap_err().contains("no rule"), "{:?}", results[3]);
}

#[test]
fn statements_join_lines_drop_comments_and_keep_loops_whole() {
    let doc = "```\nnetblast a diagram, not a command\n```\ntext\n```sh\n# a comment\nnetblast run --target HOST \\\n    -t 3   # why\n\nfor m in a b; do\n  netblast report \"$m.json\"\ndone\necho '# not a comment'\n```\n";
    let s: Vec<(String, String)> = statements("D.md", doc).into_iter().map(|s| (s.at, s.text)).collect();
    assert_eq!(
        s,
        [
            ("D.md:7".to_string(), "netblast run --target HOST -t 3".to_string()),
            ("D.md:10".to_string(), "for m in a b; do netblast report \"$m.json\"; done".to_string()),
            ("D.md:13".to_string(), "echo '# not a comment'".to_string()),
        ]
    );
    assert_eq!(shorten("run -t 30s --ramp 30s -O 2s -t 1s"), "run -t 2s --ramp 1s -O 1s -t 1s");
}
