//! `run --find-max` end to end, with the real binary: against nginx's `limit_req` (a capacity
//! made on purpose), at the ends of its range, stopped mid-search, on bad input; its result
//! rendered by `report` (text, HTML, a comparison of two searches). `fleet --find-max` is in
//! the fleet binary (`fleet_search.rs`).

use crate::util::{self, nginx_limited, run_cmd};

fn out_file(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("nb-findmax-{name}-{}.json", std::process::id()))
}

#[test]
fn finds_nginx_limit_req_within_five_percent_and_renders_it() {
    let Some(nginx) = nginx_limited("1000r/s") else { return };
    let port = nginx.http;
    let url = format!("http://127.0.0.1:{port}/limited");
    let file = out_file("nginx");
    let o = run_cmd()
        .args(["--url", &url, "--rate", "200..20k", "--find-max", "-t", "1s", "--assert", "http.failed<=1%", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let t = util::said(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let r = util::json_file(&file);
    let f = &r["find_max"];
    let rate = f["rate"].as_f64().unwrap();
    assert!((950.0..=1050.0).contains(&rate), "answer {rate}: {t}");
    assert_eq!(f["limited_by"], "target", "{t}");
    assert_eq!(f["ending"], "found");
    assert_eq!(f["unit"], "1/s");
    // The lowest failing rate is within the resolution above the answer, and failed on nginx's
    // 503s.
    let failed_at = f["failed_at"].as_f64().unwrap();
    assert!(failed_at > rate && failed_at <= rate * 1.05 + 1e-6, "{rate} {failed_at}");
    assert!(f["cause"].as_str().unwrap().contains("[503]"), "{}", f["cause"]);
    // Every step kept: offered, achieved, latency, pass/fail per threshold; the answer run twice.
    let steps = f["steps"].as_array().unwrap();
    assert!(steps.iter().all(|s| s["thresholds"][0]["text"] == "http.failed<=1%"));
    assert_eq!(steps.iter().filter(|s| s["offered"].as_f64() == Some(rate)).count(), 2);
    assert!(steps.iter().any(|s| s["outcome"] == "failed"));
    // The text report ends with the answer.
    let last = t.lines().rfind(|l| l.starts_with("Answer:")).unwrap_or_default();
    assert!(last.starts_with("Answer: holds ") && last.contains("http.failed<=1%"), "{t}");
    // report renders it again, the HTML page draws it against the offered rate.
    let rep = util::bin().arg("report").arg(&file).output().unwrap();
    assert!(util::said(&rep).contains("Answer: holds "), "{}", util::said(&rep));
    let page = file.with_extension("html");
    let h = util::bin().arg("report").arg(&file).arg("--html").arg(&page).output().unwrap();
    assert_eq!(h.status.code(), Some(0), "{}", util::said(&h));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"find-max\"") && html.contains("offered (") && html.contains("the answer"), "page");
    // Two searches side by side: each answer and the change.
    let cmp = util::bin().arg("report").arg(&file).arg(&file).arg("--compare").output().unwrap();
    assert!(util::said(&cmp).contains("highest rate held"), "{}", util::said(&cmp));
    for p in [&file, &page] {
        let _ = std::fs::remove_file(p);
    }
}

#[test]
fn the_ends_of_the_range_are_answers_with_their_exit_status() {
    let Some(nginx) = nginx_limited("1000r/s") else { return };
    let port = nginx.http;
    let url = format!("http://127.0.0.1:{port}/limited");
    // Even the lowest rate fails: exit 4, said.
    let o = run_cmd()
        .args(["--url", &url, "--rate", "4k..8k", "--find-max", "-t", "1s", "--assert", "http.failed<=1%", "-J"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(4), "{}", util::said(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["find_max"]["ending"], "bottom_failed");
    assert_eq!(r["find_max"]["steps"].as_array().unwrap().len(), 1);
    assert!(r["find_max"].get("rate").is_none());
    // The top of the range holds: exit 0, the answer is the top, no limit named.
    let o = run_cmd().args(["--url", &url, "--rate", "100..300", "--find-max", "-t", "1s", "-J"]).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["find_max"]["ending"], "top_held");
    assert_eq!(r["find_max"]["rate"].as_f64(), Some(300.0));
    assert!(r["find_max"].get("limited_by").is_none());
}

#[test]
fn every_step_of_a_udp_search_sends() {
    // Each step is a whole run on the same flags: a run aborts its workers as it ends, and the
    // next step once started already stopped (0 bit/s, blamed on the generator) until the
    // flags were rearmed between steps.
    let (server, addr) = util::spawn_server();
    let _server = util::KillOnDrop(server);
    let o = run_cmd()
        .arg(addr.to_string())
        .args(["-u", "-b", "10M..40M", "--find-max", "30%", "-t", "1s", "--assert", "lost<=50%", "-J"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", util::said(&o));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let f = &r["find_max"];
    assert_eq!(f["ending"], "top_held", "{f}");
    let steps = f["steps"].as_array().unwrap();
    assert!(steps.len() >= 3, "{f}");
    for s in steps {
        let (offered, achieved) = (s["offered"].as_f64().unwrap(), s["achieved"].as_f64().unwrap());
        assert!(achieved > offered * 0.9, "a step sent {achieved} of {offered}: {f}");
    }
}

#[test]
fn an_interrupted_search_keeps_its_finished_steps() {
    let Some(nginx) = nginx_limited("1000r/s") else { return };
    let port = nginx.http;
    let url = format!("http://127.0.0.1:{port}/limited");
    let file = out_file("interrupted");
    let child = run_cmd()
        .args(["--url", &url, "--rate", "100..20k", "--find-max", "-t", "1s", "-q", "-o"])
        .arg(&file)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Two steps of about 2-3 s each, then Ctrl-C in the third.
    std::thread::sleep(std::time::Duration::from_secs(6));
    // Before the signal, the search so far is already on disk: a kill now would lose no step.
    let kept = util::json_file(&file);
    assert_eq!(kept["find_max"]["ending"], "interrupted", "{kept}");
    let kept_steps = kept["find_max"]["steps"].as_array().map(Vec::len).unwrap_or(0);
    assert!(kept_steps >= 1, "{kept}");
    // SAFETY: kill with a valid pid and signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", util::said(&o));
    let r = util::json_file(&file);
    let f = &r["find_max"];
    assert_eq!(f["ending"], "interrupted", "{f}");
    let steps = f["steps"].as_array().unwrap();
    assert!(steps.len() >= kept_steps, "{f}");
    assert!(steps.iter().all(|s| s["outcome"] == "held"), "{f}");
    assert!(util::said(&o).contains("interrupted after"), "{}", util::said(&o));
    let _ = std::fs::remove_file(&file);
}

#[test]
fn bad_search_flags_are_refused_naming_them() {
    let o = run_cmd().args(["--url", "http://127.0.0.1:9/", "--find-max", "--rate", "1000"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(util::said(&o).contains("--rate LOW..HIGH"), "{}", util::said(&o));
    let o = run_cmd().args(["--url", "http://127.0.0.1:9/", "--find-max", "--rate", "5k..1k"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(util::said(&o).contains("high end"), "{}", util::said(&o));
    let o = run_cmd().args(["127.0.0.1", "-u", "-b", "10M..20M"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(util::said(&o).contains("which --find-max searches"), "{}", util::said(&o));
    let o = run_cmd().args(["127.0.0.1", "--find-max", "0%", "-u", "-b", "10M..20M"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(util::said(&o).contains("outside 0.1%..100%"), "{}", util::said(&o));
    let o = run_cmd()
        .args(["--url", "http://127.0.0.1:9/", "--find-max", "--rate", "1k..2k", "--ramp", "5s"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(util::said(&o).contains("--ramp does not apply"), "{}", util::said(&o));
}
