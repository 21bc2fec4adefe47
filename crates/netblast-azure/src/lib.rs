//! Agent discovery in Azure, through Azure Resource Manager with `azure_mgmt_network`.
//!
//! Two agent lists, usable wherever a fleet takes one (`--clients`, `--servers`):
//!
//! - `azure:vmss=NAME,rg=RG[,subscription=ID][,port=PORT]`: the primary private address of the
//!   primary network interface of every instance of a scale set, in either orchestration mode
//!   (read from the set first: Uniform instances' interfaces are filed under the set, Flexible
//!   instances are virtual machines listed by the set's id; see [`Orchestration`]);
//! - `azure:rg=RG,tag=KEY=VALUE[,subscription=ID][,port=PORT]`: the primary private address of
//!   every network interface in a resource group that carries the tag.
//!
//! The subscription defaults to `AZURE_SUBSCRIPTION_ID`. Credentials, the first that yields a
//! token (the one used is logged, and named in every error):
//!
//! 1. `NETBLAST_ARM_TOKEN`: a bearer token (`az account get-access-token --query accessToken -o tsv`);
//! 2. the environment: a service principal or workload identity (`AZURE_TENANT_ID`,
//!    `AZURE_CLIENT_ID` and `AZURE_CLIENT_SECRET` or `AZURE_FEDERATED_TOKEN_FILE`);
//! 3. the managed identity of the VM this runs on (the instance metadata service);
//! 4. the Azure CLI's signed-in account (`az`).
//!
//! `NETBLAST_ARM_CREDENTIAL=token|environment|managed-identity|azure-cli` picks one.
//! `NETBLAST_ARM_ENDPOINT` replaces `https://management.azure.com` (sovereign clouds, tests).
//! `NETBLAST_ARM_TIMEOUT` (seconds, default 60) bounds a whole discovery, retries included.
//! Pages are followed (`nextLink`); 429 and 503 are retried as `Retry-After` says.

pub mod fake_arm;

use azure_core::auth::{AccessToken, TokenCredential};
use azure_core::error::ErrorKind;
use azure_mgmt_network::package_2024_03::models::{NetworkInterface, NetworkInterfaceListResult};
use futures::StreamExt;
use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The port agents listen on when the list does not say.
pub const DEFAULT_PORT: u16 = 5210;
/// Most network interfaces one list may name (a guard against a runaway listing).
pub const MAX_INTERFACES: usize = 10_000;
/// Scope of Azure Resource Manager tokens, for an endpoint.
const SCOPE_SUFFIX: &str = "/.default";

/// Which network interfaces a list names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selector {
    /// Every instance of a virtual machine scale set.
    ScaleSet {
        /// The scale set's name.
        name: String,
    },
    /// Network interfaces of the resource group carrying a tag.
    Tagged {
        /// The tag's name.
        key: String,
        /// Its value.
        value: String,
    },
}

/// An `azure:` agent list, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    /// What to list.
    pub selector: Selector,
    /// The resource group.
    pub resource_group: String,
    /// The subscription (`None`: `AZURE_SUBSCRIPTION_ID`).
    pub subscription: Option<String>,
    /// The agents' port.
    pub port: u16,
}

impl Query {
    /// Parses the text after `azure:` (`vmss=NAME,rg=RG` or `rg=RG,tag=KEY=VALUE`, with optional
    /// `subscription=ID` and `port=PORT`).
    pub fn parse(text: &str) -> Result<Query, String> {
        let (mut vmss, mut rg, mut tag, mut sub, mut port) = (None, None, None, None, DEFAULT_PORT);
        for item in text.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            let (k, v) = item.split_once('=').ok_or_else(|| {
                format!("azure:{text}: {item:?} is not KEY=VALUE (vmss, rg, tag, subscription, port)")
            })?;
            let v = v.trim();
            if v.is_empty() {
                return Err(format!("azure:{text}: {k} has no value"));
            }
            let seen = match k.trim() {
                "vmss" => vmss.replace(v.to_string()).is_some(),
                "rg" => rg.replace(v.to_string()).is_some(),
                "subscription" => sub.replace(v.to_string()).is_some(),
                "tag" => {
                    let (key, value) = v
                        .split_once('=')
                        .filter(|(k, _)| !k.is_empty())
                        .ok_or_else(|| format!("azure:{text}: tag={v} is not tag=KEY=VALUE"))?;
                    tag.replace((key.to_string(), value.to_string())).is_some()
                }
                "port" => {
                    port = v
                        .parse()
                        .ok()
                        .filter(|&p| p > 0)
                        .ok_or_else(|| format!("azure:{text}: port={v} is not a port (1..65535)"))?;
                    false
                }
                other => {
                    return Err(format!(
                        "azure:{text}: unknown key {other:?} (expected vmss, rg, tag, subscription, port)"
                    ));
                }
            };
            if seen {
                return Err(format!("azure:{text}: {k} is given twice"));
            }
        }
        for (what, v) in [("rg", &rg), ("subscription", &sub), ("vmss", &vmss)] {
            if let Some(bad) = v.as_ref().filter(|v| v.contains('/') || v.contains('?') || v.contains('#')) {
                return Err(format!("azure:{text}: {what}={bad} may not contain '/', '?' or '#'"));
            }
        }
        let resource_group = rg.ok_or_else(|| format!("azure:{text}: rg=RESOURCE_GROUP is needed"))?;
        let selector = match (vmss, tag) {
            (Some(name), None) => Selector::ScaleSet { name },
            (None, Some((key, value))) => Selector::Tagged { key, value },
            (Some(_), Some(_)) => return Err(format!("azure:{text}: give vmss= or tag=, not both")),
            (None, None) => return Err(format!("azure:{text}: vmss=SCALE_SET or tag=KEY=VALUE is needed")),
        };
        Ok(Query { selector, resource_group, subscription: sub, port })
    }
}

impl fmt::Display for Query {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.selector {
            Selector::ScaleSet { name } => write!(f, "scale set {name} in resource group {}", self.resource_group),
            Selector::Tagged { key, value } => {
                write!(f, "network interfaces tagged {key}={value} in resource group {}", self.resource_group)
            }
        }
    }
}

/// Where and how to ask Resource Manager.
#[derive(Debug, Clone)]
pub struct Options {
    /// The Resource Manager endpoint.
    pub endpoint: String,
    /// Bound on one discovery, retries included.
    pub timeout: Duration,
    /// Which credential to use (`None`: the first that yields a token).
    pub credential: Option<CredentialSource>,
}

impl Options {
    /// Options from the environment (`NETBLAST_ARM_ENDPOINT`, `NETBLAST_ARM_TIMEOUT`,
    /// `NETBLAST_ARM_CREDENTIAL`).
    pub fn from_env() -> Result<Options, String> {
        let endpoint =
            std::env::var("NETBLAST_ARM_ENDPOINT").unwrap_or_else(|_| "https://management.azure.com".to_string());
        let timeout = match std::env::var("NETBLAST_ARM_TIMEOUT") {
            Ok(v) => Duration::from_secs(
                v.parse()
                    .ok()
                    .filter(|&s: &u64| s > 0)
                    .ok_or_else(|| format!("NETBLAST_ARM_TIMEOUT={v}: seconds > 0"))?,
            ),
            Err(_) => Duration::from_secs(60),
        };
        let credential = match std::env::var("NETBLAST_ARM_CREDENTIAL") {
            Ok(v) => Some(CredentialSource::parse(&v)?),
            Err(_) => None,
        };
        Ok(Options { endpoint, timeout, credential })
    }
}

/// Where a token came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CredentialSource {
    /// `NETBLAST_ARM_TOKEN`.
    Token,
    /// A service principal or workload identity from `AZURE_*` variables.
    Environment,
    /// The VM's managed identity.
    ManagedIdentity,
    /// The Azure CLI's account.
    AzureCli,
}

impl CredentialSource {
    const ALL: [CredentialSource; 4] = [Self::Token, Self::Environment, Self::ManagedIdentity, Self::AzureCli];

    fn parse(v: &str) -> Result<Self, String> {
        Ok(match v {
            "token" => Self::Token,
            "environment" => Self::Environment,
            "managed-identity" => Self::ManagedIdentity,
            "azure-cli" => Self::AzureCli,
            _ => {
                return Err(format!(
                    "NETBLAST_ARM_CREDENTIAL={v}: expected token, environment, managed-identity or azure-cli"
                ));
            }
        })
    }

    /// The credential, or why this source cannot give one here.
    fn credential(self) -> Result<Arc<dyn TokenCredential>, String> {
        match self {
            Self::Token => {
                let t = std::env::var("NETBLAST_ARM_TOKEN").map_err(|_| "NETBLAST_ARM_TOKEN is not set".to_string())?;
                Ok(Arc::new(StaticToken(t.trim().to_string())))
            }
            Self::Environment => {
                let set = |k: &str| std::env::var(k).is_ok_and(|v| !v.is_empty());
                if !(set("AZURE_TENANT_ID")
                    && set("AZURE_CLIENT_ID")
                    && (set("AZURE_CLIENT_SECRET") || set("AZURE_FEDERATED_TOKEN_FILE")))
                {
                    return Err("AZURE_TENANT_ID, AZURE_CLIENT_ID and AZURE_CLIENT_SECRET (or \
                                AZURE_FEDERATED_TOKEN_FILE) are not all set"
                        .into());
                }
                azure_identity::EnvironmentCredential::create(azure_identity::TokenCredentialOptions::default())
                    .map(|c| Arc::new(c) as Arc<dyn TokenCredential>)
                    .map_err(|e| e.to_string())
            }
            Self::ManagedIdentity => Ok(Arc::new(azure_identity::VirtualMachineManagedIdentityCredential::new(
                azure_identity::TokenCredentialOptions::default(),
            ))),
            Self::AzureCli => azure_identity::AzureCliCredential::create()
                .map(|c| Arc::new(c) as Arc<dyn TokenCredential>)
                .map_err(|e| e.to_string()),
        }
    }
}

impl fmt::Display for CredentialSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Token => "NETBLAST_ARM_TOKEN",
            Self::Environment => "the environment (AZURE_CLIENT_ID)",
            Self::ManagedIdentity => "the VM's managed identity",
            Self::AzureCli => "the Azure CLI (az)",
        })
    }
}

/// A bearer token given as is.
#[derive(Debug)]
struct StaticToken(String);

#[async_trait::async_trait]
impl TokenCredential for StaticToken {
    async fn get_token(&self, _scopes: &[&str]) -> azure_core::Result<AccessToken> {
        // Its expiry is not known: Resource Manager says 401 when it has passed.
        let until = time::OffsetDateTime::now_utc() + time::Duration::hours(1);
        Ok(AccessToken::new(self.0.clone(), until))
    }

    async fn clear_cache(&self) -> azure_core::Result<()> {
        Ok(())
    }
}

/// Why a discovery failed.
#[derive(Debug)]
pub struct Error {
    /// What was being listed.
    pub query: String,
    /// What went wrong, for a person.
    pub message: String,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "azure: {}: {}", self.query, self.message)
    }
}

impl std::error::Error for Error {}

/// Finds the first credential source that yields a token for `scope`.
async fn pick_credential(
    chosen: Option<CredentialSource>,
    scope: &str,
) -> Result<(CredentialSource, Arc<dyn TokenCredential>), String> {
    let sources: Vec<CredentialSource> = chosen.map(|c| vec![c]).unwrap_or_else(|| CredentialSource::ALL.to_vec());
    let mut tried = Vec::new();
    for source in sources {
        let cred = match source.credential() {
            Ok(c) => c,
            Err(why) => {
                tried.push(format!("{source}: {why}"));
                continue;
            }
        };
        // The instance metadata service answers at once on Azure; off Azure this would wait.
        let bound = if source == CredentialSource::ManagedIdentity { 5 } else { 30 };
        match tokio::time::timeout(Duration::from_secs(bound), cred.get_token(&[scope])).await {
            Ok(Ok(_)) => return Ok((source, cred)),
            Ok(Err(e)) => tried.push(format!("{source}: {}", one_line(&e.to_string()))),
            Err(_) => tried.push(format!("{source}: no token within {bound}s")),
        }
    }
    Err(format!("no Azure credentials: {}", tried.join("; ")))
}

fn one_line(s: &str) -> String {
    let s: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    s.chars().take(300).collect()
}

/// Turns an SDK error into a sentence naming the credential source and what to do.
fn explain(e: &azure_core::Error, source: CredentialSource, q: &Query, endpoint: &str) -> String {
    let detail = e
        .as_http_error()
        .map(|h| {
            let code = h.error_code().unwrap_or("");
            let msg = h.error_message().map(one_line).unwrap_or_default();
            match (code.is_empty(), msg.is_empty()) {
                (true, true) => String::new(),
                (false, true) => format!(" [{code}]"),
                (true, false) => format!(" [{msg}]"),
                (false, false) => format!(" [{code}: {msg}]"),
            }
        })
        .unwrap_or_default();
    match e.kind() {
        ErrorKind::HttpResponse { status, .. } => match u16::from(*status) {
            401 => format!(
                "Resource Manager refused the token from {source} (401 Unauthorized: expired, or for another tenant \
                 or audience than {endpoint}){detail}"
            ),
            403 => format!(
                "the identity from {source} may not read scale sets, virtual machines or network interfaces in \
                 resource group {} (403 Forbidden: it needs Reader there){detail}",
                q.resource_group
            ),
            404 => format!("not found (404): check the subscription, resource group and name{detail}"),
            429 | 503 => format!(
                "Resource Manager kept answering {} after retries that honoured Retry-After{detail}",
                u16::from(*status)
            ),
            s => format!("Resource Manager answered {s}{detail}"),
        },
        ErrorKind::Io => format!("cannot reach Resource Manager at {endpoint}: {}", one_line(&root_cause(e))),
        ErrorKind::DataConversion => {
            format!("Resource Manager's answer is not in the shape netblast reads: {}", one_line(&e.to_string()))
        }
        _ => one_line(&e.to_string()),
    }
}

/// The innermost error's text (`Connection refused`, not the retry policy's "expired" around
/// it), with the outermost's when they differ.
fn root_cause(e: &azure_core::Error) -> String {
    let mut inner: &dyn std::error::Error = e;
    while let Some(s) = inner.source() {
        inner = s;
    }
    let (outer, root) = (e.to_string(), inner.to_string());
    if outer == root { root } else { format!("{root} ({outer})") }
}

/// The primary private address of a network interface, if it is one this list wants.
fn address_of(nic: &NetworkInterface, sel: &Selector) -> Option<IpAddr> {
    if let Selector::Tagged { key, value } = sel {
        let tags = nic.resource.tags.as_ref()?;
        if tags.get(key)?.as_str()? != value {
            return None;
        }
    }
    let props = nic.properties.as_ref()?;
    // A VM with several interfaces: only its primary one (absent means the only one).
    if props.primary == Some(false) {
        return None;
    }
    let configs = &props.ip_configurations;
    let config = configs
        .iter()
        .find(|c| c.properties.as_ref().and_then(|p| p.primary) == Some(true))
        .or_else(|| configs.first())?;
    config.properties.as_ref()?.private_ip_address.as_deref()?.parse().ok()
}

/// How a scale set orchestrates its virtual machines, which decides how they are listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Orchestration {
    /// Instances made from one model; Resource Manager files their network interfaces under the
    /// scale set (`…/virtualMachineScaleSets/NAME/networkInterfaces`, the network provider).
    Uniform,
    /// Instances are ordinary virtual machines that own ordinary network interfaces: listed with
    /// the compute provider's `virtualMachines?$filter='virtualMachineScaleSet/id' eq '…'`, their
    /// primary interfaces read from the network provider. `az vmss create` makes these unless
    /// told otherwise (azure-cli 2.55 and later).
    Flexible,
}

impl fmt::Display for Orchestration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Uniform => "Uniform",
            Self::Flexible => "Flexible",
        })
    }
}

/// What a discovery found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The agents: primary private addresses with the list's port, in the order Resource
    /// Manager gave them, without repeats.
    pub agents: Vec<SocketAddr>,
    /// A scale set's orchestration mode (`None` for a tag list).
    pub orchestration: Option<Orchestration>,
    /// What was listed, for a person: "scale set clients (Flexible orchestration): 30 virtual
    /// machines, 30 agents".
    pub note: String,
}

/// Pages of network interfaces, flattened, with the runaway guard.
async fn collect_nics<S>(mut pages: S, seen: &mut usize) -> Result<Vec<NetworkInterface>, ListError>
where
    S: futures::Stream<Item = azure_core::Result<NetworkInterfaceListResult>> + Unpin,
{
    let mut out = Vec::new();
    while let Some(page) = pages.next().await {
        let page = page.map_err(ListError::Arm)?;
        *seen += page.value.len();
        if *seen > MAX_INTERFACES {
            return Err(ListError::TooMany);
        }
        out.extend(page.value);
    }
    Ok(out)
}

/// Why a listing stopped.
enum ListError {
    Arm(azure_core::Error),
    TooMany,
    Other(String),
}

/// The resource group named in a resource id (`/subscriptions/S/resourceGroups/RG/...`).
fn resource_group_of(id: &str) -> Option<&str> {
    let mut parts = id.split('/');
    while let Some(p) = parts.next() {
        if p.eq_ignore_ascii_case("resourceGroups") {
            return parts.next().filter(|g| !g.is_empty());
        }
    }
    None
}

/// The id of a virtual machine's primary network interface (the one marked primary, else the
/// only one), lower case: Resource Manager's ids compare without case.
fn primary_nic_id(vm: &azure_mgmt_compute::package_2024_07_01::models::VirtualMachine) -> Option<String> {
    let nics = &vm.properties.as_ref()?.network_profile.as_ref()?.network_interfaces;
    let nic = nics
        .iter()
        .find(|n| n.properties.as_ref().and_then(|p| p.primary) == Some(true))
        .or_else(|| if nics.len() == 1 { nics.first() } else { None })?;
    nic.sub_resource.id.as_deref().map(str::to_ascii_lowercase)
}

/// The agents of a Flexible scale set: its virtual machines (compute provider, filtered by the
/// set's id), then their primary interfaces (network provider, listed per resource group).
async fn flexible_set(
    compute: &azure_mgmt_compute::package_2024_07_01::Client,
    network: &azure_mgmt_network::package_2024_03::Client,
    set_id: &str,
    q: &Query,
    subscription: &str,
    seen: &mut usize,
) -> Result<(Vec<IpAddr>, usize), ListError> {
    let filter = format!("'virtualMachineScaleSet/id' eq '{set_id}'");
    let mut pages =
        compute.virtual_machines_client().list(&q.resource_group, subscription).filter(filter).into_stream();
    let mut wanted: Vec<String> = Vec::new();
    let mut vms = 0usize;
    while let Some(page) = pages.next().await {
        let page = page.map_err(ListError::Arm)?;
        vms += page.value.len();
        if vms > MAX_INTERFACES {
            return Err(ListError::TooMany);
        }
        for vm in &page.value {
            // The filter is Resource Manager's; a VM of another set would be its bug, but an
            // agent list must not take it.
            let member = vm
                .properties
                .as_ref()
                .and_then(|p| p.virtual_machine_scale_set.as_ref())
                .and_then(|s| s.id.as_deref())
                .is_some_and(|id| id.eq_ignore_ascii_case(set_id));
            if let (true, Some(id)) = (member, primary_nic_id(vm)) {
                wanted.push(id);
            }
        }
    }
    let mut groups: Vec<String> =
        wanted.iter().filter_map(|id| resource_group_of(id)).map(str::to_ascii_lowercase).collect();
    groups.sort();
    groups.dedup();
    let mut by_id: HashMap<String, NetworkInterface> = HashMap::new();
    for g in groups {
        let nics = network.network_interfaces_client().list(&g, subscription).into_stream();
        for nic in collect_nics(nics, seen).await? {
            if let Some(id) = nic.resource.id.as_deref() {
                by_id.insert(id.to_ascii_lowercase(), nic);
            }
        }
    }
    let ips = wanted.iter().filter_map(|id| by_id.get(id)).filter_map(|nic| address_of(nic, &q.selector)).collect();
    Ok((ips, vms))
}

/// Lists the agents a query names: their primary private addresses with the query's port, in
/// the order Resource Manager gave them, without repeats. A scale set is read first, to list
/// its instances the way its orchestration mode files them.
pub async fn discover(q: &Query, opts: &Options) -> Result<Found, Error> {
    let fail = |message: String| Error { query: q.to_string(), message };
    let subscription = match &q.subscription {
        Some(s) => s.clone(),
        None => std::env::var("AZURE_SUBSCRIPTION_ID")
            .map_err(|_| fail("no subscription: give subscription=ID or set AZURE_SUBSCRIPTION_ID".into()))?,
    };
    let endpoint = azure_core::Url::parse(&opts.endpoint)
        .map_err(|e| fail(format!("NETBLAST_ARM_ENDPOINT={}: {e}", opts.endpoint)))?;
    let scope = format!("{}{SCOPE_SUFFIX}", opts.endpoint.trim_end_matches('/'));
    let work = async {
        let (source, cred) = pick_credential(opts.credential, &scope).await.map_err(fail)?;
        tracing::info!(query = %q, "azure: credentials from {source}");
        // Retries end by half the time allowed and no wait is over a quarter of it, so an
        // endpoint that keeps failing (refused, reset) is reported as that failure before the
        // deadline below, which is left for one that does not answer at all.
        let retry = || {
            azure_core::RetryOptions::exponential(
                azure_core::ExponentialRetryOptions::default()
                    .initial_delay(Duration::from_millis(500))
                    .max_retries(6u32)
                    .max_delay((opts.timeout / 4).clamp(Duration::from_millis(500), Duration::from_secs(30)))
                    .max_total_elapsed(opts.timeout / 2),
            )
        };
        let network = azure_mgmt_network::package_2024_03::Client::builder(cred.clone())
            .endpoint(endpoint.clone())
            .scopes(&[&scope])
            .retry(retry())
            .build()
            .map_err(|e| fail(e.to_string()))?;
        let arm = |e: ListError| match e {
            ListError::Arm(e) => fail(explain(&e, source, q, &opts.endpoint)),
            ListError::TooMany => fail(format!("more than {MAX_INTERFACES} network interfaces: narrow the list")),
            ListError::Other(m) => fail(m),
        };
        let mut seen = 0usize;
        let (ips, orchestration, listed) = match &q.selector {
            Selector::ScaleSet { name } => {
                let compute = azure_mgmt_compute::package_2024_07_01::Client::builder(cred)
                    .endpoint(endpoint)
                    .scopes(&[&scope])
                    .retry(retry())
                    .build()
                    .map_err(|e| fail(e.to_string()))?;
                let set = compute
                    .virtual_machine_scale_sets_client()
                    .get(&q.resource_group, name, &subscription)
                    .await
                    .map_err(|e| arm(ListError::Arm(e)))?;
                use azure_mgmt_compute::package_2024_07_01::models::OrchestrationMode;
                // Absent: a set made before the mode existed, which is Uniform.
                let mode = match set.properties.as_ref().and_then(|p| p.orchestration_mode.as_ref()) {
                    None | Some(OrchestrationMode::Uniform) => Orchestration::Uniform,
                    Some(OrchestrationMode::Flexible) => Orchestration::Flexible,
                    Some(OrchestrationMode::UnknownValue(v)) => {
                        return Err(arm(ListError::Other(format!(
                            "the scale set's orchestration mode {v:?} is neither Uniform nor Flexible"
                        ))));
                    }
                };
                tracing::info!(query = %q, "azure: {mode} orchestration");
                match mode {
                    Orchestration::Uniform => {
                        let pages = network
                            .network_interfaces_client()
                            .list_virtual_machine_scale_set_network_interfaces(&q.resource_group, name, &subscription)
                            .into_stream();
                        let nics = collect_nics(pages, &mut seen).await.map_err(arm)?;
                        let ips = nics.iter().filter_map(|n| address_of(n, &q.selector)).collect();
                        (ips, Some(mode), format!("{seen} network interface(s)"))
                    }
                    Orchestration::Flexible => {
                        let set_id = set.resource.id.clone().unwrap_or_else(|| {
                            format!(
                                "/subscriptions/{subscription}/resourceGroups/{}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}",
                                q.resource_group
                            )
                        });
                        let (ips, vms) = flexible_set(&compute, &network, &set_id, q, &subscription, &mut seen)
                            .await
                            .map_err(arm)?;
                        (ips, Some(mode), format!("{vms} virtual machine(s), {seen} network interface(s)"))
                    }
                }
            }
            Selector::Tagged { .. } => {
                let pages = network.network_interfaces_client().list(&q.resource_group, &subscription).into_stream();
                let nics = collect_nics(pages, &mut seen).await.map_err(arm)?;
                let ips = nics.iter().filter_map(|n| address_of(n, &q.selector)).collect();
                (ips, None, format!("{seen} network interface(s)"))
            }
        };
        let mut agents: Vec<SocketAddr> = Vec::new();
        for ip in ips {
            let a = SocketAddr::new(ip, q.port);
            if !agents.contains(&a) {
                agents.push(a);
            }
        }
        let what = match orchestration {
            Some(m) => format!("{q} ({m} orchestration)"),
            None => q.to_string(),
        };
        if agents.is_empty() {
            return Err(Error {
                query: what,
                message: format!("no agents: {listed} listed, none with a primary private address that matches"),
            });
        }
        let note = format!("{what}: {listed} listed, {} agent(s)", agents.len());
        tracing::info!("azure: {note}");
        Ok(Found { agents, orchestration, note })
    };
    match tokio::time::timeout(opts.timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(fail(format!(
            "no complete answer from Resource Manager at {} within {}s (NETBLAST_ARM_TIMEOUT)",
            opts.endpoint,
            opts.timeout.as_secs()
        ))),
    }
}

/// [`discover`] for callers without a runtime, or inside one: it runs on a thread of its own.
pub fn discover_blocking(q: &Query, opts: &Options) -> Result<Found, Error> {
    std::thread::scope(|s| {
        s.spawn(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| Error { query: q.to_string(), message: format!("cannot start a runtime: {e}") })?;
            rt.block_on(discover(q, opts))
        })
        .join()
        .unwrap_or_else(|_| Err(Error { query: q.to_string(), message: "discovery panicked".into() }))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse() {
        let q = Query::parse("vmss=clients,rg=perf,subscription=abc,port=7000").unwrap();
        assert_eq!(q.selector, Selector::ScaleSet { name: "clients".into() });
        assert_eq!((q.resource_group.as_str(), q.subscription.as_deref(), q.port), ("perf", Some("abc"), 7000));
        let q = Query::parse("rg=perf,tag=role=server").unwrap();
        assert_eq!(q.selector, Selector::Tagged { key: "role".into(), value: "server".into() });
        assert_eq!(q.port, DEFAULT_PORT);
        for (bad, says) in [
            ("vmss=a", "rg="),
            ("rg=a", "vmss="),
            ("rg=a,vmss=b,tag=c=d", "not both"),
            ("rg=a,vmss=b,rg=c", "twice"),
            ("rg=a,vmss=b,port=0", "port"),
            ("rg=a,vmss=b,zone=1", "unknown key"),
            ("rg=a,tag=novalue", "tag=KEY=VALUE"),
            ("rg=a/../b,vmss=c", "may not contain"),
            ("rg=a,vmss", "KEY=VALUE"),
        ] {
            let e = Query::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
