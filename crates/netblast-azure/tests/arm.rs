//! Discovery against a fake Resource Manager on loopback: pages, throttling, refusals, silence.

use netblast_azure::fake_arm::{nic, page, FakeArm, Reply};
use netblast_azure::{discover, CredentialSource, Options, Query};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

const VMSS: &str = "/subscriptions/sub1/resourceGroups/perf/providers/microsoft.Compute/virtualMachineScaleSets/clients/networkInterfaces";
const RG_NICS: &str = "/subscriptions/sub1/resourceGroups/perf/providers/Microsoft.Network/networkInterfaces";

fn opts(arm: &FakeArm, timeout: Duration) -> Options {
    // Every test uses the same token, so setting it from parallel tests is harmless.
    std::env::set_var("NETBLAST_ARM_TOKEN", "test-token");
    Options { endpoint: arm.endpoint(), timeout, credential: Some(CredentialSource::Token) }
}

fn addrs(list: &[&str], port: u16) -> Vec<SocketAddr> {
    list.iter().map(|ip| SocketAddr::new(ip.parse().unwrap(), port)).collect()
}

#[tokio::test]
async fn a_scale_set_over_two_pages_gives_each_instances_primary_address() {
    let p1 = page(
        &[nic("c0", "10.1.0.4", true, &[]), nic("c0-extra", "10.9.0.4", false, &[]), nic("c1", "10.1.0.5", true, &[])],
        Some("/page2"),
    );
    let p2 = page(&[nic("c2", "10.1.0.6", true, &[]), nic("c2-again", "10.1.0.6", true, &[])], None);
    let arm = FakeArm::start(vec![(VMSS, vec![Reply::ok(p1)]), ("/page2", vec![Reply::ok(p2)])]).await.unwrap();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1,port=7000").unwrap();
    let got = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
    // Non-primary interfaces and repeats are left out; the primary IP configuration is taken.
    assert_eq!(got, addrs(&["10.1.0.4", "10.1.0.5", "10.1.0.6"], 7000));
    let seen = arm.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(seen[0].target.contains("api-version="), "{seen:?}");
    assert!(seen.iter().all(|s| s.authorization.as_deref() == Some("Bearer test-token")), "{seen:?}");
}

#[tokio::test]
async fn tagged_interfaces_of_a_resource_group() {
    let p = page(
        &[
            nic("s0", "10.2.0.4", true, &[("role", "server")]),
            nic("c0", "10.1.0.4", true, &[("role", "client")]),
            nic("x", "10.3.0.4", true, &[]),
            nic("s1", "10.2.0.5", true, &[("role", "server"), ("team", "perf")]),
        ],
        None,
    );
    let arm = FakeArm::start(vec![(RG_NICS, vec![Reply::ok(p)])]).await.unwrap();
    let q = Query::parse("rg=perf,tag=role=server,subscription=sub1").unwrap();
    let got = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
    assert_eq!(got, addrs(&["10.2.0.4", "10.2.0.5"], 5210));
}

#[tokio::test]
async fn throttling_is_retried_after_what_retry_after_says() {
    let ok = page(&[nic("c0", "10.1.0.4", true, &[])], None);
    let throttled = Reply::error(429, "TooManyRequests", "slow down").header("Retry-After", "2");
    let arm = FakeArm::start(vec![(VMSS, vec![throttled, Reply::ok(ok)])]).await.unwrap();
    let q = Query::parse("vmss=clients,rg=perf,subscription=sub1").unwrap();
    let t = Instant::now();
    let got = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap();
    assert_eq!(got, addrs(&["10.1.0.4"], 5210));
    assert_eq!(arm.seen().len(), 2);
    assert!(t.elapsed() >= Duration::from_secs(2), "retried after {:?}, Retry-After said 2 s", t.elapsed());
}

#[tokio::test]
async fn a_refused_token_names_where_it_came_from() {
    let arm = FakeArm::start(vec![(
        VMSS,
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
    let arm = FakeArm::start(vec![("/subscriptions/sub1/resourceGroups/perf/providers/microsoft.Compute/virtualMachineScaleSets/empty/networkInterfaces", vec![Reply::ok(page(&[], None))])]).await.unwrap();
    let q = Query::parse("vmss=nosuch,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    assert!(e.contains("404") && e.contains("ResourceNotFound"), "{e}");
    let q = Query::parse("vmss=empty,rg=perf,subscription=sub1").unwrap();
    let e = discover(&q, &opts(&arm, Duration::from_secs(20))).await.unwrap_err().to_string();
    assert!(e.contains("no agents") && e.contains("0 network interface"), "{e}");
}

#[tokio::test]
async fn a_silent_resource_manager_times_out() {
    let arm = FakeArm::start(vec![(VMSS, vec![Reply::hang()])]).await.unwrap();
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
    std::env::set_var("NETBLAST_ARM_TOKEN", "test-token");
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
