//! A fleet's text summary reads at the scale the seeds run (30–240 VMs): the tests as a
//! distribution with the slowest and fastest few named, each failure reason once.

use netblast_spec::merge::merge;
use netblast_spec::result::{AgentInfo, AgentStatus, ClockInfo, RunResult, TcpLimits};

fn bulk() -> RunResult {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/real/bulk.json");
    netblast_spec::upgrade::read_result(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Test `i` of `n`: the real bulk result from its own agent, at a share of its rate that puts
/// the tests in a shuffled order.
fn test_of(base: &RunResult, i: usize, n: usize) -> (RunResult, f64) {
    let mut r = base.clone();
    let host = format!("vm{i:03}");
    r.agent =
        Some(AgentInfo { hostname: host.clone(), id: host, address: format!("10.1.{}.{}:5210", i / 200, i % 200 + 1) });
    r.test_id = format!("test{i}");
    let share = ((i * 37) % n + 1) as f64 / n as f64;
    for w in &mut r.summary.ways {
        w.sender.bits_per_s *= share;
        if let Some(rv) = w.receiver.as_mut() {
            rv.bits_per_s *= share;
        }
    }
    (r, share)
}

#[test]
fn a_180_client_fleet_reads_in_40_lines_and_names_its_slowest_five() {
    let base = bulk();
    let n = 180;
    let tests: Vec<(RunResult, f64)> = (0..n).map(|i| test_of(&base, i, n)).collect();
    let names: Vec<String> = (0..n).map(|i| format!("t{i}.json")).collect();
    let inputs: Vec<(&str, &RunResult)> = names.iter().map(String::as_str).zip(tests.iter().map(|t| &t.0)).collect();
    let mut m = merge(&inputs).unwrap();
    assert_eq!(m.parts.len(), n);
    // Eleven agents that never ran, for one reason, and one for another.
    for k in 0..12 {
        let why = if k < 11 { "cannot connect: Connection refused (os error 111)" } else { "no answer in time" };
        m.agents.push(AgentStatus {
            agent: AgentInfo { hostname: String::new(), id: format!("gone{k}"), address: format!("10.2.0.{k}:5210") },
            role: "client".into(),
            clock: ClockInfo::default(),
            actual_start_unix_ns: None,
            status: "failed".into(),
            why: Some(why.into()),
            parts: Vec::new(),
            summary: None,
        });
    }
    let text = netblast_report::text::summary(&m);
    let lines = text.lines().count();
    assert!(lines <= 40, "{lines} lines:\n{text}");
    let mut by_rate: Vec<(f64, usize)> = tests.iter().enumerate().map(|(i, t)| (t.1, i)).collect();
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    let slow = text.split("Slowest 5:").nth(1).and_then(|t| t.split("Fastest").next()).expect(&text);
    for (_, i) in &by_rate[..5] {
        assert!(slow.contains(&format!(" vm{i:03} ")), "vm{i:03} among the slowest:\n{text}");
    }
    assert_eq!(slow.lines().filter(|l| l.contains(" vm")).count(), 5, "{text}");
    let (lo, hi) = (by_rate[0].0, by_rate[n - 1].0);
    let rate = |share: f64| {
        let w = &base.summary.ways[0];
        netblast_spec::units::fmt_bits_per_s(w.receiver.map(|r| r.bits_per_s).unwrap_or(w.sender.bits_per_s) * share)
    };
    assert!(text.contains(&format!("min {}", rate(lo))) && text.contains(&format!("max {}", rate(hi))), "{text}");
    assert_eq!(text.matches("Connection refused").count(), 1, "each reason once:\n{text}");
    assert!(text.contains("11 client agents failed: cannot connect"), "{text}");
    assert!(text.contains("and 3 more"), "eight named, the rest counted:\n{text}");
}

#[test]
fn a_small_fleet_still_lists_every_test() {
    let base = bulk();
    let tests: Vec<RunResult> = (0..3).map(|i| test_of(&base, i, 3).0).collect();
    let inputs: Vec<(&str, &RunResult)> = tests.iter().map(|r| ("t.json", r)).collect();
    let text = netblast_report::text::summary(&merge(&inputs).unwrap());
    for i in 0..3 {
        assert!(text.contains(&format!(" vm{i:03} ")), "{text}");
    }
    assert!(!text.contains("Slowest"), "{text}");
}

/// Sets every way of `r` to have been held by the receiver's window (`rwnd`) or by the
/// congestion window for 90% of 10 s, by its sender's kernel clocks.
fn held(r: &mut RunResult, rwnd: bool) {
    let (busy, wall) = (9_000_000, 10_000_000);
    for w in &mut r.summary.ways {
        w.limits = Some(TcpLimits {
            busy_us: busy,
            rwnd_limited_us: if rwnd { busy } else { 0 },
            sndbuf_limited_us: 0,
            wall_us: wall,
            peer_window: 0,
        });
    }
}

#[test]
fn each_tests_own_limit_is_told_in_a_small_fleet_and_grouped_in_a_large_one() {
    let base = bulk();
    // A large fleet: the five slowest held by the receiver's window, the rest by congestion.
    let n = 180;
    let mut tests: Vec<(RunResult, f64)> = (0..n).map(|i| test_of(&base, i, n)).collect();
    let mut by_rate: Vec<(f64, usize)> = tests.iter().enumerate().map(|(i, t)| (t.1, i)).collect();
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    let slow: Vec<usize> = by_rate[..5].iter().map(|x| x.1).collect();
    for (i, t) in tests.iter_mut().enumerate() {
        held(&mut t.0, slow.contains(&i));
    }
    let names: Vec<String> = (0..n).map(|i| format!("t{i}.json")).collect();
    let inputs: Vec<(&str, &RunResult)> = names.iter().map(String::as_str).zip(tests.iter().map(|t| &t.0)).collect();
    let m = merge(&inputs).unwrap();
    let text = netblast_report::text::summary(&m);
    assert!(text.lines().count() <= 40, "{text}");
    let group = text.lines().find(|l| l.trim_start().starts_with("receiver window: 5 tests (")).expect(&text);
    for i in &slow {
        assert!(group.contains(&format!("vm{i:03}")), "vm{i:03} in {group}");
        let line = text.lines().find(|l| l.contains(&format!(" vm{i:03} "))).expect(&text);
        assert!(line.ends_with("(limited by receiver window 90%)"), "{line}");
    }
    assert!(text.contains(&format!("congestion window or path: {} tests (", n - 5)), "{text}");
    assert!(text.contains("and 167 more"), "eight named, the rest counted:\n{text}");

    // A small fleet: each test's verdict under it, the one held by its receiver's window so.
    let mut small: Vec<RunResult> = (0..3).map(|i| test_of(&base, i, 3).0).collect();
    for (i, r) in small.iter_mut().enumerate() {
        held(r, i == 1);
    }
    let inputs: Vec<(&str, &RunResult)> = small.iter().map(|r| ("t.json", r)).collect();
    let text = netblast_report::text::summary(&merge(&inputs).unwrap());
    let verdicts: Vec<&str> = text.lines().filter(|l| l.trim_start().starts_with("verdict: ")).collect();
    // One per test, then the whole fleet's.
    assert_eq!(verdicts.len(), 4, "{text}");
    let after = |i: usize| {
        let mut it = text.lines().skip_while(|l| !l.contains(&format!(" vm{i:03} ")));
        it.nth(1).unwrap_or_default().to_string()
    };
    assert!(after(1).contains("verdict: receiver window limited 90% of the time"), "{text}");
    assert!(after(0).contains("verdict: congestion limited 90% of the time"), "{text}");
    assert!(after(2).contains("verdict: congestion limited 90% of the time"), "{text}");
}

#[test]
fn a_fleet_logs_replay_takes_each_tests_frames_from_its_own_agent_and_its_first_final() {
    // Found in the audit: `report X.fleet.jsonl` took the last final for a test id from any
    // agent: a forged final replaced a good agent's test (16.1 GB shown against 35.8 GB).
    use netblast_spec::fleet::{AgentMsg, LogAgent, LogHeader, LogRecord, LogTest};
    let good = bulk();
    let mut forged = good.clone();
    forged.test_id = "forged".into();
    for w in &mut forged.summary.ways {
        w.sender.bytes /= 2;
        w.sender.bits_per_s /= 2.0;
    }
    let agent = |role: &str, address: &str| LogAgent {
        role: role.into(),
        address: address.into(),
        hostname: address.into(),
        clock: ClockInfo::default(),
    };
    let header = LogHeader {
        t0_unix_ns: good.start_unix_ns.unwrap_or_default(),
        profile: good.plan.profile.clone(),
        agents: vec![agent("client", "10.0.0.1:5210"), agent("server", "10.0.0.2:5210")],
        tests: vec![LogTest { client: 0, server: Some(1) }],
    };
    let frame = |agent: usize, r: &RunResult| LogRecord::Frame {
        agent,
        at_ns: 0,
        msg: Box::new(AgentMsg::Final { id: 0, result: Box::new(r.clone()) }),
    };
    let lines = [
        LogRecord::Fleet(Box::new(header)),
        frame(0, &good),
        // The server agent claims the client's test, and the client sends a second final.
        frame(1, &forged),
        frame(0, &forged),
    ];
    let text: String = lines.iter().map(|l| serde_json::to_string(l).unwrap() + "\n").collect();
    let shown = netblast_report::fleet::render(&text).unwrap().text;
    let bytes = netblast_spec::units::fmt_bytes(good.summary.ways[0].sender.bytes);
    assert!(shown.contains(&bytes), "the good test's {bytes} shown:\n{shown}");
    let half = netblast_spec::units::fmt_bytes(forged.summary.ways[0].sender.bytes);
    assert!(!shown.contains(&half), "a forged {half} shown:\n{shown}");
}
