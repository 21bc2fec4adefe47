//! hold (concurrent connections held) end to end: the connections it says it holds are the
//! kernel's established sockets (`ss`), both ends count every probe, and a connection limit on
//! the path (an nftables `ct count` rule) is what it finds, with the target named as the cause.

use crate::util::{self, InPair, Server};
use netblast_spec::RunResult;
use netblast_spec::profile::{HoldSection, Profile, Workload};
use std::process::Command;

fn hold(edit: impl FnOnce(&mut HoldSection)) -> Profile {
    let (mut p, _) = Profile::load("hold").unwrap();
    p.run.duration = Some("2s".parse().unwrap());
    p.run.interval = Some("500ms".parse().unwrap());
    let Workload::Hold(h) = &mut p.workload else { panic!("the hold profile is not a hold test") };
    edit(h);
    p.validate("test").unwrap();
    p
}

/// Established TCP sockets whose peer is `dst`, as the kernel lists them.
fn established_to(dst: &str) -> usize {
    let out = Command::new("ss").args(["-Htn", "state", "established", "dst", dst]).output().expect("ss");
    assert!(out.status.success(), "ss: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().count()
}

#[test]
fn the_connections_held_are_the_kernels_established_sockets_and_every_probe_is_answered() {
    // A loopback address of its own, so that `ss` sees this test's connections only.
    let Ok(srv) = Server::start("127.0.0.61:0") else { panic!("cannot listen on 127.0.0.61") };
    let p = hold(|h| {
        h.conns = 600;
        h.flows = Some(2);
    });
    let run = std::thread::spawn(move || util::run(srv.addr, p));
    // In the run's third interval: the connections are open (600 at a few thousand a second).
    std::thread::sleep(std::time::Duration::from_millis(1300));
    let seen = established_to("127.0.0.61");
    let r: RunResult = run.join().unwrap();
    assert!(r.complete, "{:?}", r.errors);
    // The held connections, the control connection and one anchor per flow.
    assert!((600..=603).contains(&seen), "ss saw {seen} established connections to the server");
    let full: Vec<_> = r.intervals.iter().filter(|iv| iv.end_s - iv.start_s > 0.45).collect();
    assert!(full.len() >= 3, "{} whole intervals", full.len());
    for iv in &full[1..] {
        let m = iv.sums[0].msgs.as_ref().unwrap();
        assert_eq!(m.sent, 600, "interval {}: held {}", iv.index, m.sent);
        // The server answered exactly the probes the client counted, in the same interval.
        assert_eq!(m.received, Some(600), "interval {}", iv.index);
    }
    assert_eq!(r.held(), Some(600));
    let m = r.summary.ways[0].msgs.unwrap();
    assert_eq!(m.lost, Some(0));
    assert_eq!(m.received, Some(m.sent), "the server answered every probe");
    let lat = r.summary.ways[0].latency.as_ref().unwrap();
    assert_eq!(lat.count, 600, "one connect sample per connection opened");
    assert!(netblast_report::verdict::of_kind(&r).is_empty());
    let text = netblast_report::text::full(&r);
    assert!(text.contains("600 of 600 connections held at the end"), "{text}");

    // A run that ends inside an interval probes that last part too: it is shown on its own.
    let srv = Server::start("127.0.0.1:0").unwrap();
    let mut p = hold(|h| h.conns = 100);
    p.run.duration = Some("1300ms".parse().unwrap());
    let r = util::run(srv.addr, p);
    let last = r.intervals.last().unwrap();
    assert!(last.end_s - last.start_s > 0.2, "{} .. {}", last.start_s, last.end_s);
    assert_eq!(last.sums[0].msgs.as_ref().map(|m| m.sent), Some(100));
    assert_eq!(r.held(), Some(100));
}

#[test]
fn a_connection_limit_on_the_path_is_what_it_holds_and_the_target_is_named() {
    if !util::netns_or_skip("hold: a connection limit on the path") {
        return;
    }
    let ns = util::NetnsPair::create().unwrap();
    let (_serve, addr) = ns.serve(&ns.b);
    let target = format!("{}:{}", ns.addr_b, addr.port());
    // A firewall's connection table of 200: the kernel resets every new connection beyond it
    // (the control connection and the anchors count too) and counts what it reset.
    ns.nft(&ns.b, "add table inet nbh").unwrap();
    ns.nft(&ns.b, "add chain inet nbh input { type filter hook input priority 0; }").unwrap();
    ns.nft(&ns.b, "add rule inet nbh input tcp flags syn ct count over 200 counter reject with tcp reset").unwrap();
    let out = ns
        .cmd(&ns.a, env!("CARGO_BIN_EXE_netblast"))
        .args(["run", "--probe", "tcpinfo", "--target", &target, "--profile", "hold", "--json"])
        .args(["-P", "2", "--conns", "300", "--rate", "1000", "-t", "2", "-i", "500ms"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: RunResult = serde_json::from_slice(&out.stdout).unwrap();
    let held = r.held().unwrap();
    // 200 in the table less the control connection and the two anchors.
    assert!((190..=197).contains(&held), "held {held} behind a table of 200");
    let c = r.summary.ways[0].msgs.unwrap().conns.unwrap();
    assert!(c.refused > 0 && c.failed() == c.refused, "{c:?}");
    // Every refusal the client counted is a SYN the rule reset.
    let reset = ns.nft_counter(&ns.b, &["chain", "inet", "nbh", "input"]).unwrap().packets;
    assert!(
        c.refused <= reset && reset <= c.refused + 2,
        "client counted {} refused, the rule reset {reset}",
        c.refused
    );
    let v = netblast_report::verdict::of_kind(&r);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(v[0].contains(&format!("{held} of 300 connections")) && v[0].contains("refused by the target"), "{}", v[0]);
}

#[test]
fn find_max_refuses_a_hold_test_before_anything_is_sent_and_says_why() {
    // Nothing listens on the target: a refusal that comes first sends nothing.
    let out = util::run_cmd()
        .args(["--target", "127.0.0.1:9", "--profile", "hold", "--find-max", "0.05", "--rate", "100..1000"])
        .args(["--assert", "p99<10ms"])
        .output()
        .unwrap();
    let said = util::said(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("--find-max cannot search a hold test") && said.contains("--conns"), "{said}");
}
