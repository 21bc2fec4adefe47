//! `netblast campaign` end to end, with the real binary against a real `serve`: a matrix run,
//! killed and resumed (exactly the missing runs run, the summary agrees with the files), bad
//! campaign files refused naming the key, a changed file refused on resume, a cell whose runs
//! all fail, a baseline, and the summary page drawn by Chromium.

use crate::browser::{browse, figure, ink};
use crate::util::{self, spawn_server};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh directory for one test, removed when the test ends (passed or not).
fn dir(name: &str) -> util::tempdir::Dir {
    util::tempdir::Dir::new(&format!("nb-campaign-{name}"))
}

/// `netblast serve` on loopback, stopped when the test ends (passed or not), and its address.
fn serve() -> (util::KillOnDrop, std::net::SocketAddr) {
    let (child, addr) = spawn_server();
    (util::KillOnDrop(child), addr)
}

/// `netblast serve ARGS`, stopped when the test ends, and its address.
fn serve_with(args: &[&str]) -> (util::KillOnDrop, std::net::SocketAddr) {
    let (child, addr) = util::spawn_server_with(args);
    (util::KillOnDrop(child), addr)
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// The whole results in `runs/`.
fn results(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(out.join("runs")).map(|d| d.map(|e| e.unwrap().path()).collect()).unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|x| x == "json") && !p.to_string_lossy().contains(".incomplete."));
    v.sort();
    v
}

/// The median of `v`.
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 }
}

#[test]
fn a_campaign_killed_and_resumed_runs_exactly_the_missing_runs() {
    let (_server, addr) = serve();
    let tmp = dir("resume");
    let d = tmp.path();
    let file = write(
        &d.join("c.toml"),
        &format!(
            "profile = \"bulk-1flow\"\ntarget = \"{addr}\"\nrepeats = 3\norder = \"shuffled\"\n[set]\nduration = \
             \"1s\"\nprobe = \"tcpinfo\"\n[axes]\nflows = [1, 2]\nblock = [\"64K\", \"1M\"]\n"
        ),
    );
    let out = d.join("out");
    // Killed (SIGKILL: no chance to tidy up) once five runs are written.
    let mut child = util::bin()
        .arg("campaign")
        .arg(&file)
        .arg("-o")
        .arg(&out)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while results(&out).len() < 5 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = results(&out).len();
    assert!((5..12).contains(&kept), "{kept} results when killed");
    // Every file there is a whole result: each was written atomically.
    for f in results(&out) {
        let r = util::json_file(&f);
        assert_eq!(r["complete"], true, "{}", f.display());
    }
    let o = util::bin().arg("campaign").arg(&file).arg("-o").arg(&out).output().unwrap();
    let t = util::said(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let missing = 12 - kept;
    assert!(t.contains(&format!("{kept} runs already there, {missing} to run")), "{t}");
    assert_eq!(t.lines().filter(|l| l.starts_with('[')).count(), missing, "exactly the missing runs ran: {t}");
    assert_eq!(results(&out).len(), 12);
    // The summary: 4 cells of 3 runs, each median the median of its files' throughput.
    let s = util::json_file(&out.join("summary.json"));
    assert_eq!(s["schema"], "netblast.campaign/1");
    let cells = s["cells"].as_array().unwrap();
    assert_eq!(cells.len(), 4);
    for c in cells {
        assert_eq!(c["n"], 3, "{c}");
        let id = c["id"].as_str().unwrap();
        let runs: Vec<f64> = (1..=3)
            .map(|rep| {
                let r = util::json_file(&out.join("runs").join(format!("{id}-r{rep}.json")));
                r["summary"]["ways"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| {
                        w["receiver"]["bits_per_s"].as_f64().unwrap_or(w["sender"]["bits_per_s"].as_f64().unwrap())
                    })
                    .sum()
            })
            .collect();
        let t = &c["figures"]["throughput"];
        assert!((t["median"].as_f64().unwrap() - median(runs.clone())).abs() < 1.0, "{id}: {t} vs {runs:?}");
        let (lo, hi) = (t["ci_low"].as_f64().unwrap(), t["ci_high"].as_f64().unwrap());
        let mean = runs.iter().sum::<f64>() / 3.0;
        assert!(lo <= mean && mean <= hi, "{id}: the mean {mean} in [{lo}, {hi}]");
        assert_eq!(t["min"].as_f64().unwrap(), runs.iter().copied().fold(f64::INFINITY, f64::min));
        // The settings are the cell's.
        let flows = c["settings"]["flows"].as_i64().unwrap();
        let r = util::json_file(&out.join("runs").join(format!("{id}-r1.json")));
        assert_eq!(r["plan"]["profile"]["bulk"]["flows"].as_i64(), Some(flows), "{id}");
    }
    // Run again: nothing to run, the same summary.
    let again = util::bin().arg("campaign").arg(&file).arg("-o").arg(&out).arg("-q").output().unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", util::said(&again));
    assert_eq!(util::json_file(&out.join("summary.json")), s);
    // `report` renders the summary again: the same text the campaign printed, and its CSV.
    let rep = util::bin().arg("report").arg(out.join("summary.json")).output().unwrap();
    assert_eq!(rep.status.code(), Some(0), "{}", util::said(&rep));
    let shown = String::from_utf8_lossy(&rep.stdout).to_string();
    assert!(shown.contains("Campaign: 4 cells × 3 repeats: 12 of 12 runs done") && t.contains(shown.trim()), "{shown}");
    let rep = util::bin().arg("report").arg(out.join("summary.json")).arg("--csv").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&rep.stdout), std::fs::read_to_string(out.join("summary.csv")).unwrap());
    // The file changed: refused, naming the change.
    let changed = write(&d.join("c2.toml"), &std::fs::read_to_string(&file).unwrap().replace("\"1M\"", "\"4M\""));
    let o = util::bin().arg("campaign").arg(&changed).arg("-o").arg(&out).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", util::said(&o));
    assert!(util::said(&o).contains("axes.block: [64K, 1M] then, [64K, 4M] now"), "{}", util::said(&o));
    // The summary as CSV and HTML, the page drawn by a browser.
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    assert!(csv.starts_with("cell,flows,block,figure,unit,n,failed,median"), "{csv}");
    let (dom, shot) = browse(&out.join("summary.html"), d);
    let fig = figure(&dom, "chart-0");
    assert!(fig.contains("against flows") && fig.matches("<circle").count() == 4, "{fig}");
    let (rows, colour) = ink(&shot);
    assert!(rows > 600 && colour > 500, "the page drew its charts: {rows} rows, {colour} coloured pixels");
}

#[test]
fn bad_campaign_files_are_refused_naming_the_key() {
    let tmp = dir("bad");
    let d = tmp.path();
    let cases = [
        ("[axes]\nflws = [1, 2]\n", "axes.flws: `netblast run` has no flag --flws (--flows?)"),
        ("[axes]\nrate = [\"100\", \"200\"]\n", "--rate"),
        ("[axes]\nflows = []\n", "axes.flows: has no values"),
        ("[set]\nduration = \"1s\"\n[axes]\nblock = [\"64K\", \"lots\"]\n", "lots"),
        ("repeats = 2\n[bogus]\nx = 1\n", "bogus"),
        ("[axes]\ndirection = [\"up\", \"sideways\"]\n", "up, down or bidir"),
    ];
    for (text, said) in cases {
        let f = write(&d.join("c.toml"), &format!("target = \"127.0.0.1:9\"\n{text}"));
        let o = util::bin().arg("campaign").arg(&f).arg("-o").arg(d.join("out")).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{text}: {}", util::said(&o));
        assert!(util::said(&o).contains(said), "{text}: {}", util::said(&o));
        assert!(!d.join("out").exists(), "{text}: nothing is made before every cell checks");
    }
    // --dry-run prints each cell's command line, runs nothing.
    let f = write(&d.join("c.toml"), "target = \"127.0.0.1:9\"\n[axes]\ndirection = [\"up\", \"down\"]\n");
    let o = util::bin().arg("campaign").arg(&f).arg("-o").arg(d.join("out")).arg("--dry-run").output().unwrap();
    let t = util::said(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    assert!(t.contains("c002 direction=down: netblast run --target=127.0.0.1:9 --reverse"), "{t}");
}

#[test]
fn a_cell_whose_runs_all_fail_is_a_failed_cell_and_a_baseline_compares_cells() {
    let (_server, addr) = serve();
    let tmp = dir("failed");
    let d = tmp.path();
    // Port 9 on loopback: nothing listens (discard is not run here); refused at once.
    let text = format!(
        "repeats = 2\norder = \"grouped\"\n[set]\nduration = \"1s\"\nprobe = \"tcpinfo\"\n[axes]\ntarget = \
         [\"{addr}\", \"127.0.0.1:9\"]\n"
    );
    let file = write(&d.join("c.toml"), &text);
    let base = d.join("base");
    let o = util::bin().arg("campaign").arg(&file).arg("-o").arg(&base).output().unwrap();
    let t = util::said(&o);
    assert_eq!(o.status.code(), Some(1), "failed runs make an incomplete campaign: {t}");
    assert!(t.contains("FAILED cell c002"), "{t}");
    let s = util::json_file(&base.join("summary.json"));
    assert_eq!(s["cells"][1]["all_failed"], true, "{s}");
    assert_eq!(s["cells"][1]["failed"], 2);
    assert_eq!(s["runs"]["failed"], 2);
    assert!(base.join("runs/c002-r1.error").exists());
    // The same campaign against the first as its baseline: the good cell compared with its
    // interval; the failed one has nothing to compare.
    let o = util::bin()
        .arg("campaign")
        .arg(&file)
        .arg("-o")
        .arg(d.join("next"))
        .arg("--baseline")
        .arg(&base)
        .output()
        .unwrap();
    let t = util::said(&o);
    assert!(t.contains(&format!("Against the baseline {}", base.display())), "{t}");
    assert!(t.contains("c001 target=") && t.contains("throughput "), "{t}");
    let s = util::json_file(&d.join("next/summary.json"));
    let ch = &s["cells"][0]["vs_baseline"]["throughput"];
    assert!(ch["ci_low"].as_f64().unwrap() <= ch["change"].as_f64().unwrap(), "{ch}");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// `netblast campaign FILE -o DIR ARGS…`: its exit status and what it said.
fn campaign(file: &str, out: &Path, args: &[&str]) -> (Option<i32>, String) {
    let o = util::bin().arg("campaign").arg(file).arg("-o").arg(out).args(args).output().unwrap();
    (o.status.code(), util::said(&o))
}

#[test]
fn the_shipped_campaigns_run_with_their_targets_substituted() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../../configs/campaigns");
    let file = |name: &str| format!("{root}/{name}.toml");
    let tmp = dir("shipped");
    let d = tmp.path();
    let (_server, addr) = serve();
    let target = format!("--target={addr}");
    // bbr against cubic, one flow: both congestion controls run, compared.
    let (code, t) = campaign(
        &file("bbr-vs-cubic"),
        &d.join("bbr"),
        &[&target, "--axis", "flows=1", "--set", "duration=1s", "--set", "omit=1s", "--repeats", "2"],
    );
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("congestion=bbr vs cubic at flows=1: throughput "), "{t}");
    let r = util::json_file(&d.join("bbr/runs/c002-r1.json"));
    assert_eq!(r["plan"]["profile"]["tcp"]["congestion"], "bbr");
    // The latency a full link adds, cubic against bbr: the probes' figures compared too.
    let (code, t) = campaign(
        &file("bufferbloat"),
        &d.join("bloat"),
        &[&target, "--set", "duration=1s", "--set", "omit=1s", "--set", "idle=1s", "--repeats", "2"],
    );
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("congestion=bbr vs cubic: throughput "), "{t}");
    assert!(t.contains("\nlatency added by load p50:\n  c001 congestion=cubic "), "{t}");
    let r = util::json_file(&d.join("bloat/runs/c002-r1.json"));
    assert!(r["latency_probe"]["loaded"]["count"].as_u64().unwrap() > 0, "{}", r["latency_probe"]);
    // The VM matrix with its target axis given: every cell checks.
    let axis = format!("target={addr}");
    let (code, t) = campaign(&file("vm-matrix"), &d.join("vms"), &["--axis", &axis, "--dry-run"]);
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("4 cells × 3 repeats") && t.contains("--flows=8 --reverse"), "{t}");
    // nginx against Envoy: two HTTP servers (netblast's responders) as the two proxies.
    let (h1, h2) = (free_port(), free_port());
    let (_web1, _) = serve_with(&["--http", &h1.to_string()]);
    let (_web2, _) = serve_with(&["--http", &h2.to_string()]);
    let proxies = format!("target=http://127.0.0.1:{h1}/,http://127.0.0.1:{h2}/");
    let (code, t) = campaign(
        &file("proxies"),
        &d.join("proxies"),
        &["--axis", &proxies, "--axis", "connections=4,8", "--set", "duration=1s", "--repeats", "2"],
    );
    assert_eq!(code, Some(0), "{t}");
    let s = util::json_file(&d.join("proxies/summary.json"));
    assert_eq!(s["runs"]["done"], 8, "{t}");
    assert!(s["cells"][3]["figures"]["p99"]["median"].as_f64().unwrap() > 0.0, "{s}");
    assert!(t.contains(&format!("target=http://127.0.0.1:{h2}/ vs http://127.0.0.1:{h1}/ at connections=4")), "{t}");
    // The IDPS comparison as a fleet campaign: two token agents as the clients, one run per
    // mode against the first as its baseline.
    let token = util::token_file("campaign-fleet", "a token for the campaign's fleet");
    let tf = format!("token-file={}", token.display());
    let mut agents = Vec::new();
    for _ in 0..2 {
        agents.push(serve_with(&["--probe", "tcpinfo", "--token-file", token.to_str().unwrap()]));
    }
    let clients = format!("clients={},{}", agents[0].1, agents[1].1);
    let url = format!("url=http://127.0.0.1:{h1}/");
    let fleet_args = |label: &'static str| {
        vec![
            "--set".to_string(),
            clients.clone(),
            "--set".into(),
            tf.clone(),
            "--set".into(),
            url.clone(),
            "--set".into(),
            "duration=1s".into(),
            "--set".into(),
            format!("label={label}"),
            "--axis".into(),
            "rate=50,100".into(),
            "--repeats".into(),
            "2".into(),
        ]
    };
    let off: Vec<String> = fleet_args("idps-off");
    let (code, t) = campaign(&file("idps-modes"), &d.join("off"), &off.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{t}");
    let r = util::json_file(&d.join("off/runs/c002-r1.json"));
    assert_eq!(r["parts"].as_array().map(Vec::len), Some(2), "each run a fleet of the two clients");
    assert_eq!(r["label"], "idps-off");
    assert!(d.join("off/runs/c002-r1.fleet.jsonl").exists(), "each fleet's frames beside its result");
    let mut deny = fleet_args("idps-deny");
    deny.extend(["--baseline".to_string(), d.join("off").display().to_string()]);
    let (code, t) =
        campaign(&file("idps-modes"), &d.join("deny"), &deny.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{t}");
    assert!(t.contains("Against the baseline") && t.contains("c002 rate=100: rps "), "{t}");
}
