//! Discovery against a fake Resource Manager on loopback: scale sets in either orchestration
//! mode, tags, pages, throttling, refusals, silence.

use netblast_azure::fake_arm::{self, FakeArm, Reply, flexible_set, nic, page, uniform_set};
use netblast_azure::{CredentialSource, Options, Orchestration, Query, discover};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const SET: &str = "/subscriptions/sub1/resourceGroups/perf/providers/Microsoft.Compute/virtualMachineScaleSets/clients";
const RG_NICS: &str = "/subscriptions/sub1/resourceGroups/perf/providers/Microsoft.Network/networkInterfaces";

fn opts(arm: &FakeArm, timeout: Duration) -> Options {
    // SAFETY: every test sets the same value, and the only readers in this process are std's
    // own (`std::env::var`, under std's environment lock); the endpoints are IP literals, so no
    // resolver calls libc's getenv beside a write.
    unsafe { std::env::set_var("NETBLAST_ARM_TOKEN", "test-token") };
    Options { endpoint: arm.endpoint(), timeout, credential: Some(CredentialSource::Token) }
}

fn addrs(list: &[&str], port: u16) -> Vec<SocketAddr> {
    list.iter().map(|ip| SocketAddr::new(ip.parse().unwrap(), port)).collect()
}

const INSTANCES: [&str; 5] = ["10.1.0.4", "10.1.0.5", "10.1.0.6", "10.1.0.7", "10.1.0.8"];

/// The same five instances as a Uniform set (with and without the mode field, as sets made
/// before it answer) and as a Flexible one (beside VMs of no set, in the same resource group),
/// listed two a page: the same agents, in the same order, and the mode said.
#[tokio::test]
async fn a_scale_set_gives_the_same_agents_in_either_orchestration_mode() {
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1,port=7000").unwrap();
    let want = addrs(&INSTANCES, 7000);
    for (mode, routes) in [
        (Orchestration::Uniform, uniform_set("sub1", "perf", "clients", Some("Uniform"), &INSTANCES, 2)),
        (Orchestration::Uniform, uniform_set("sub1", "perf", "clients", None, &INSTANCES, 2)),
        (Orchestration::Flexible, flexible_set("sub1", "perf", "clients", &INSTANCES, &["10.1.0.99", "10.1.0.98"], 2)),
    ] {
        let arm = FakeArm::start(routes).await.unwrap();
        let found = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
        assert_eq!(found.agents, want, "{mode}");
        assert_eq!(found.orchestration, Some(mode));
        assert!(
            found.note.contains(&format!("{mode} orchestration")) && found.note.contains("5 agent"),
            "{}",
            found.note
        );
        let seen = arm.seen();
        assert!(seen.iter().all(|s| s.target.contains("api-version=")), "{seen:?}");
        assert!(seen.iter().all(|s| s.authorization.as_deref() == Some("Bearer test-token")), "{seen:?}");
        // Read the set, then every page: 3 pages of interfaces (Uniform); 3 of VMs, and 5 of
        // the group's 9 interfaces (5 primary, 2 secondary, the 2 other VMs') (Flexible).
        let pages = if mode == Orchestration::Uniform { 1 + 3 } else { 1 + 3 + 5 };
        assert_eq!(seen.len(), pages, "{mode}: {seen:?}");
        if mode == Orchestration::Flexible {
            let vms = seen.iter().find(|s| s.target.contains("/virtualMachines?")).unwrap();
            assert!(vms.target.contains("%24filter=%27virtualMachineScaleSet%2Fid%27+eq+%27"), "{vms:?}");
        }
    }
}

/// A Flexible set whose VMs' interfaces live in another resource group than the set.
#[tokio::test]
async fn a_flexible_set_reads_interfaces_where_they_live() {
    let vm = |name: &str, nic_rg: &str| {
        fake_arm::virtual_machine(
            "sub1",
            "perf",
            name,
            Some(SET),
            &[&format!(
                "/subscriptions/sub1/resourceGroups/{nic_rg}/providers/Microsoft.Network/networkInterfaces/{name}-nic"
            )],
        )
    };
    let nic_in = |name: &str, rg: &str, ip: &str| {
        fake_arm::nic_with_id(
            &format!(
                "/subscriptions/sub1/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces/{name}-nic"
            ),
            ip,
            true,
            &[],
            None,
        )
    };
    let arm = FakeArm::start(vec![
        (SET.to_string(), vec![Reply::ok(fake_arm::scale_set("sub1", "perf", "clients", Some("Flexible"), 2).to_string())]),
        (
            "/subscriptions/sub1/resourceGroups/perf/providers/Microsoft.Compute/virtualMachines?virtualMachineScaleSet/id".into(),
            vec![Reply::ok(page(&[vm("a", "perf"), vm("b", "netrg")], None))],
        ),
        (RG_NICS.to_string(), vec![Reply::ok(page(&[nic_in("a", "perf", "10.1.0.4")], None))]),
        (
            "/subscriptions/sub1/resourceGroups/netrg/providers/Microsoft.Network/networkInterfaces".into(),
            vec![Reply::ok(page(&[nic_in("b", "netrg", "10.1.0.5")], None))],
        ),
    ])
    .await
    .unwrap();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1").unwrap();
    let found = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
    assert_eq!(found.agents, addrs(&["10.1.0.4", "10.1.0.5"], 5210));
}

#[tokio::test]
async fn tagged_interfaces_of_a_resource_group() {
    let p = page(
        &[
            nic("s0", "10.2.0.4", true, &[("role", "server")]),
            nic("c0", "10.1.0.4", true, &[("role", "client")]),
            nic("x", "10.3.0.4", true, &[]),
            nic("s1", "10.2.0.5", true, &[("role", "server"), ("team", "perf")]),
            nic("s1-extra", "10.2.0.6", false, &[("role", "server")]),
        ],
        None,
    );
    let arm = FakeArm::start(vec![(RG_NICS, vec![Reply::ok(p)])]).await.unwrap();
    let q = Query::parse("rg=perf,tag=role=server,subscription=sub1").unwrap();
    let found = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
    // Non-primary interfaces are left out; the primary IP configuration is taken.
    assert_eq!(found.agents, addrs(&["10.2.0.4", "10.2.0.5"], 5210));
    assert_eq!(found.orchestration, None);
}

#[tokio::test]
async fn throttling_is_retried_after_what_retry_after_says() {
    let ok = page(&[nic("c0", "10.1.0.4", true, &[])], None);
    let throttled = Reply::error(429, "TooManyRequests", "slow down").header("Retry-After", "2");
    let arm = FakeArm::start(vec![(RG_NICS, vec![throttled, Reply::ok(ok)])]).await.unwrap();
    let q = Query::parse("rg=perf,tag=netblast=agent,subscription=sub1").unwrap();
    let t = Instant::now();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    // (c0 carries no tag: the listing succeeds and names no agent.)
    assert!(e.contains("no agents: 1 network interface"), "{e}");
    assert_eq!(arm.seen().len(), 2);
    assert!(t.elapsed() >= Duration::from_secs(2), "retried after {:?}, Retry-After said 2 s", t.elapsed());
}

#[tokio::test]
async fn a_refused_token_names_where_it_came_from() {
    let arm = FakeArm::start(vec![(
        SET,
        vec![Reply::error(401, "InvalidAuthenticationToken", "The access token is invalid.")],
    )])
    .await
    .unwrap();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    for want in ["401", "NETBLAST_ARM_TOKEN", "InvalidAuthenticationToken", "scale set clients"] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
    assert_eq!(arm.seen().len(), 1, "a 401 is not retried");
}

#[tokio::test]
async fn a_forbidden_listing_says_what_role_is_missing() {
    let arm = FakeArm::start(vec![(
        RG_NICS,
        vec![Reply::error(403, "AuthorizationFailed", "The client does not have authorization to perform action")],
    )])
    .await
    .unwrap();
    let q = Query::parse("rg=perf,tag=role=server,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    for want in ["403", "Reader", "perf", "AuthorizationFailed"] {
        assert!(e.contains(want), "{want:?} missing from: {e}");
    }
}

#[tokio::test]
async fn an_unknown_scale_set_and_an_empty_one_are_errors() {
    let mut routes = uniform_set("sub1", "perf", "empty", Some("Uniform"), &[], 10);
    routes.extend(flexible_set("sub1", "perf", "emptyflex", &[], &["10.1.0.99"], 10));
    let arm = FakeArm::start(routes).await.unwrap();
    let q = Query::parse("vmss=nosuch,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    assert!(e.contains("404") && e.contains("ResourceNotFound"), "{e}");
    let q = Query::parse("vmss=empty,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    assert!(e.contains("no agents") && e.contains("0 network interface") && e.contains("Uniform"), "{e}");
    let q = Query::parse("vmss=emptyflex,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    assert!(e.contains("no agents") && e.contains("0 virtual machine") && e.contains("Flexible"), "{e}");
}

#[tokio::test]
async fn a_silent_resource_manager_times_out() {
    let arm = FakeArm::start(vec![(SET, vec![Reply::hang()])]).await.unwrap();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1").unwrap();
    let t = Instant::now();
    let e = discover(&q, &opts(&arm, Duration::from_secs(1))).await.unwrap_err().to_string();
    assert!(e.contains("within 1s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
}

#[tokio::test]
async fn an_unreachable_endpoint_and_missing_credentials_are_clear() {
    // A port nothing listens on (bound, then released).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1").unwrap();
    // SAFETY: as in `opts`.
    unsafe { std::env::set_var("NETBLAST_ARM_TOKEN", "test-token") };
    let o = Options {
        endpoint: format!("http://127.0.0.1:{port}"),
        timeout: Duration::from_secs(5),
        credential: Some(CredentialSource::Token),
    };
    let t = Instant::now();
    let e = discover(&q, &o).await.unwrap_err().to_string();
    // Refused at every try: said so (not as a silent endpoint), before the deadline.
    assert!(e.contains("cannot reach Resource Manager") && e.to_lowercase().contains("refused"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    // The Azure CLI is not installed here: picking it says so (and nothing is contacted).
    let o = Options { credential: Some(CredentialSource::AzureCli), ..o };
    let e = discover(&q, &o).await.unwrap_err().to_string();
    assert!(e.contains("no Azure credentials") && e.contains("Azure CLI"), "{e}");
}
