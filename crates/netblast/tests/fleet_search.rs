//! `fleet --find-max` end to end: two client agents on loopback against nginx's `limit_req`,
//! each step a whole fleet, the answer what the clients hold together.

use crate::util::{self, nginx_limited};

#[test]
fn a_fleet_search_finds_what_its_clients_hold_together() {
    let Some(nginx) = nginx_limited("1000r/s") else { return };
    let port = nginx.http;
    let _one = crate::fleet::one_fleet();
    let token = util::token_file("findmax-fleet", "find-max fleet token");
    let agent = || {
        let (child, addr) = util::spawn_server_with(&["--probe", "tcpinfo", "--token-file", token.to_str().unwrap()]);
        (util::KillOnDrop(child), addr.to_string())
    };
    let ((_a, a), (_b, b)) = (agent(), agent());
    let url = format!("http://127.0.0.1:{port}/limited");
    let file = std::env::temp_dir().join(format!("nb-findmax-fleet-{}.json", std::process::id()));
    let o = crate::fleet::fleet_cmd(&token)
        .args(["--clients", &format!("{a},{b}"), "--url", &url, "--rate", "100..10k", "--find-max", "-t", "1s"])
        .args(["--assert", "http.failed<=1%", "-q", "-o"])
        .arg(&file)
        .output()
        .unwrap();
    let t = util::said(&o);
    assert_eq!(o.status.code(), Some(0), "{t}");
    let r = util::json_file(&file);
    let f = &r["find_max"];
    // Two clients at the step's rate each: nginx's 1000/s is what they hold together.
    let rate = f["rate"].as_f64().unwrap();
    assert!((950.0..=1050.0).contains(&rate), "answer {rate}: {t}");
    assert_eq!(f["limited_by"], "target", "{t}");
    let steps = f["steps"].as_array().unwrap();
    let twice =
        |s: &serde_json::Value| (s["offered"].as_f64().unwrap() - 2.0 * s["asked"].as_f64().unwrap()).abs() < 1e-6;
    assert!(steps.iter().all(twice), "offered in all: {f}");
    assert_eq!(r["parts"].as_array().map(Vec::len), Some(2), "the answer's fleet, merged");
    // Each step's agents' frames beside the result, one log a step.
    for n in 1..=steps.len() {
        let log = file.with_file_name(format!("{}.fleet.step-{n}.jsonl", file.file_name().unwrap().to_string_lossy()));
        assert!(log.exists(), "{}", log.display());
        let _ = std::fs::remove_file(&log);
    }
    // One fleet a step: a metrics endpoint for one fleet is refused.
    let o = crate::fleet::fleet_cmd(&token)
        .args(["--clients", &a, "--url", &url, "--rate", "100..10k", "--find-max", "--metrics", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", util::said(&o));
    assert!(util::said(&o).contains("--metrics"), "{}", util::said(&o));
    let _ = std::fs::remove_file(&file);
    let _ = std::fs::remove_file(&token);
}
