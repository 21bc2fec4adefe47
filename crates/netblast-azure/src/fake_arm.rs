//! A stand-in for Azure Resource Manager on loopback, for tests: it answers the calls discovery
//! makes with what a test scripted, shaped like the real API (`value` and an absolute
//! `nextLink`, ARM error bodies, `Retry-After`), and records every request it got.
//!
//! The documents ([`nic`], [`scale_set`], [`virtual_machine`], and [`uniform_set`] /
//! [`flexible_set`], which script a whole set) follow the examples of the REST specifications
//! in Azure/azure-rest-api-specs: `NetworkInterfaceList.json` and the scale-set network
//! interface listing (network provider, 2024-03-01), `VirtualMachineScaleSet_Get_*.json` and
//! `VirtualMachine_List_*_Gen.json` (compute provider, 2024-07-01): the same fields and
//! nesting, with ids of the real forms (a Uniform instance's interface filed under its set, a
//! Flexible instance's under `Microsoft.Network/networkInterfaces`), and the listing of a
//! resource group's virtual machines filtered by `$filter='virtualMachineScaleSet/id' eq '…'`
//! as Resource Manager filters it (a route whose key carries `?TEXT` answers only requests whose
//! decoded query contains TEXT; the first route that matches answers).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scripted answer.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Extra headers (`Retry-After`).
    pub headers: Vec<(String, String)>,
    /// JSON body; `{base}` is replaced by the server's own base URL (for `nextLink`).
    pub body: String,
    /// Never answer (the connection stays open and silent).
    pub hang: bool,
}

impl Reply {
    /// 200 with a body.
    pub fn ok(body: impl Into<String>) -> Reply {
        Reply { status: 200, headers: Vec::new(), body: body.into(), hang: false }
    }

    /// An ARM error: `{"error":{"code":..,"message":..}}`.
    pub fn error(status: u16, code: &str, message: &str) -> Reply {
        let body = serde_json::json!({ "error": { "code": code, "message": message } }).to_string();
        Reply { status, headers: Vec::new(), body, hang: false }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// An answer that never comes.
    pub fn hang() -> Reply {
        Reply { status: 0, headers: Vec::new(), body: String::new(), hang: true }
    }
}

/// A request the server got.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Path and query.
    pub target: String,
    /// The `Authorization` header.
    pub authorization: Option<String>,
}

/// A network interface as Resource Manager lists it (JSON), in the resource group `rg` of
/// subscription `s`.
pub fn nic(name: &str, ip: &str, primary: bool, tags: &[(&str, &str)]) -> serde_json::Value {
    let id = format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/{name}");
    nic_with_id(&id, ip, primary, tags, None)
}

/// A network interface with its full id, attached to the virtual machine `vm` (an id) if given.
pub fn nic_with_id(id: &str, ip: &str, primary: bool, tags: &[(&str, &str)], vm: Option<&str>) -> serde_json::Value {
    let tags: serde_json::Map<String, serde_json::Value> =
        tags.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
    let name = id.rsplit('/').next().unwrap_or(id);
    let subnet = "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/vnet/subnets/default";
    let mut v = serde_json::json!({
        "name": name,
        "id": id,
        "etag": "W/\"00000000-0000-0000-0000-000000000000\"",
        "type": "Microsoft.Network/networkInterfaces",
        "location": "westeurope",
        "tags": tags,
        "properties": {
            "provisioningState": "Succeeded",
            "resourceGuid": "00000000-0000-0000-0000-000000000000",
            "primary": primary,
            "macAddress": "00-0D-3A-1B-C7-21",
            "enableAcceleratedNetworking": true,
            "enableIPForwarding": false,
            "vnetEncryptionSupported": false,
            "dnsSettings": { "dnsServers": [], "appliedDnsServers": [] },
            "ipConfigurations": [
                { "name": "secondary", "id": format!("{id}/ipConfigurations/secondary"),
                  "properties": { "provisioningState": "Succeeded", "privateIPAddress": "192.0.2.200",
                                  "privateIPAllocationMethod": "Dynamic", "subnet": { "id": subnet },
                                  "primary": false, "privateIPAddressVersion": "IPv4" } },
                { "name": "ipconfig1", "id": format!("{id}/ipConfigurations/ipconfig1"),
                  "properties": { "provisioningState": "Succeeded", "privateIPAddress": ip,
                                  "privateIPAllocationMethod": "Dynamic", "subnet": { "id": subnet },
                                  "primary": true, "privateIPAddressVersion": "IPv4" } }
            ]
        }
    });
    if let Some(vm) = vm {
        v["properties"]["virtualMachine"] = serde_json::json!({ "id": vm });
    }
    v
}

/// A scale set as `GET …/virtualMachineScaleSets/NAME` answers (`mode`: `Uniform`, `Flexible`,
/// or `None` for a set that predates the field).
pub fn scale_set(sub: &str, rg: &str, name: &str, mode: Option<&str>, capacity: usize) -> serde_json::Value {
    let mut v = serde_json::json!({
        "name": name,
        "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}"),
        "type": "Microsoft.Compute/virtualMachineScaleSets",
        "location": "westeurope",
        "tags": { "netblast": "agent" },
        "sku": { "name": "Standard_D4_v4", "tier": "Standard", "capacity": capacity },
        "identity": { "type": "SystemAssigned", "principalId": "11111111-1111-1111-1111-111111111111",
                      "tenantId": "22222222-2222-2222-2222-222222222222" },
        "properties": {
            "singlePlacementGroup": false,
            "upgradePolicy": { "mode": "Automatic" },
            "virtualMachineProfile": {
                "osProfile": { "computerNamePrefix": name, "adminUsername": "netblast",
                               "linuxConfiguration": { "disablePasswordAuthentication": true } },
                "storageProfile": {
                    "imageReference": { "publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                        "sku": "22_04-lts-gen2", "version": "latest" },
                    "osDisk": { "createOption": "FromImage", "caching": "ReadWrite",
                                "managedDisk": { "storageAccountType": "Premium_LRS" } }
                },
                "networkProfile": {
                    "networkInterfaceConfigurations": [ { "name": format!("{name}Nic"), "properties": {
                        "primary": true, "enableAcceleratedNetworking": true,
                        "ipConfigurations": [ { "name": "ipconfig1", "properties": { "primary": true,
                            "subnet": { "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/virtualNetworks/vnet/subnets/clients") } } } ]
                    } } ]
                }
            },
            "provisioningState": "Succeeded",
            "overprovision": false,
            "doNotRunExtensionsOnOverprovisionedVMs": false,
            "platformFaultDomainCount": 1,
            "uniqueId": "33333333-3333-3333-3333-333333333333",
            "timeCreated": "2026-11-20T09:12:44.1234567+00:00"
        }
    });
    if let Some(m) = mode {
        v["properties"]["orchestrationMode"] = serde_json::Value::from(m);
    }
    v
}

/// A virtual machine as `GET …/virtualMachines` lists it: a member of the set `set_id` (if
/// given) with these network interfaces (ids; the first is marked primary when there are several).
pub fn virtual_machine(sub: &str, rg: &str, name: &str, set_id: Option<&str>, nics: &[&str]) -> serde_json::Value {
    let refs: Vec<serde_json::Value> = nics
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut r = serde_json::json!({ "id": id, "properties": { "deleteOption": "Delete" } });
            if nics.len() > 1 {
                r["properties"]["primary"] = serde_json::Value::from(i == 0);
            }
            r
        })
        .collect();
    let mut v = serde_json::json!({
        "name": name,
        "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{name}"),
        "type": "Microsoft.Compute/virtualMachines",
        "location": "westeurope",
        "tags": {},
        "zones": ["1"],
        "identity": { "type": "SystemAssigned", "principalId": "44444444-4444-4444-4444-444444444444",
                      "tenantId": "22222222-2222-2222-2222-222222222222" },
        "properties": {
            "vmId": "55555555-5555-5555-5555-555555555555",
            "hardwareProfile": { "vmSize": "Standard_D4_v4" },
            "storageProfile": {
                "imageReference": { "publisher": "Canonical", "offer": "0001-com-ubuntu-server-jammy",
                                    "sku": "22_04-lts-gen2", "version": "latest", "exactVersion": "22.04.202611150" },
                "osDisk": { "osType": "Linux", "name": format!("{name}_OsDisk_1"), "createOption": "FromImage",
                            "caching": "ReadWrite", "diskSizeGB": 30, "deleteOption": "Delete",
                            "managedDisk": { "storageAccountType": "Premium_LRS",
                                             "id": format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/disks/{name}_OsDisk_1") } },
                "dataDisks": []
            },
            "osProfile": { "computerName": name, "adminUsername": "netblast", "secrets": [],
                           "allowExtensionOperations": true, "requireGuestProvisionSignal": true,
                           "linuxConfiguration": { "disablePasswordAuthentication": true, "provisionVMAgent": true,
                                                   "patchSettings": { "patchMode": "ImageDefault", "assessmentMode": "ImageDefault" } } },
            "networkProfile": { "networkInterfaces": refs },
            "diagnosticsProfile": { "bootDiagnostics": { "enabled": true } },
            "provisioningState": "Succeeded",
            "platformFaultDomain": 0,
            "timeCreated": "2026-11-20T09:14:02.5550000+00:00"
        }
    });
    if let Some(set) = set_id {
        v["properties"]["virtualMachineScaleSet"] = serde_json::json!({ "id": set });
    }
    v
}

/// A page of virtual machines (or any resources); `next` is a path and query on this server.
pub fn vm_page(vms: &[serde_json::Value], next: Option<&str>) -> String {
    page(vms, next)
}

/// The routes Resource Manager answers for a **Uniform** scale set `name` whose instances have
/// these private addresses: the set (`orchestrationMode` as given: `Some("Uniform")`, or `None`
/// as older sets answer), and its network interfaces filed under it, `per_page` a page.
pub fn uniform_set(
    sub: &str,
    rg: &str,
    name: &str,
    mode: Option<&str>,
    ips: &[&str],
    per_page: usize,
) -> Vec<(String, Vec<Reply>)> {
    let set =
        format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}");
    let nics: Vec<serde_json::Value> = ips
        .iter()
        .enumerate()
        .map(|(i, ip)| {
            let vm = format!("{set}/virtualMachines/{i}");
            nic_with_id(&format!("{vm}/networkInterfaces/{name}Nic"), ip, true, &[], Some(&vm))
        })
        .collect();
    let mut routes = vec![(set.clone(), vec![Reply::ok(scale_set(sub, rg, name, mode, ips.len()).to_string())])];
    routes.extend(paged(&format!("{set}/networkInterfaces"), &nics, per_page));
    routes
}

/// The routes Resource Manager answers for a **Flexible** scale set `name` whose instances
/// have these private addresses: the set, the resource group's virtual machines (the set's
/// members when filtered by its id, `per_page` a page; unfiltered, also `others`, VMs of no
/// set), and the resource group's network interfaces (the members' primary and secondary ones,
/// and the other VMs'). Ids use the resource group's name in upper case in places, as Resource
/// Manager's ids may: they compare without case.
pub fn flexible_set(
    sub: &str,
    rg: &str,
    name: &str,
    ips: &[&str],
    others: &[&str],
    per_page: usize,
) -> Vec<(String, Vec<Reply>)> {
    let set =
        format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachineScaleSets/{name}");
    let nic_id = |vm: &str, k: usize| {
        format!(
            "/subscriptions/{sub}/resourceGroups/{}/providers/Microsoft.Network/networkInterfaces/{vm}-nic{k}",
            rg.to_uppercase()
        )
    };
    let mut members = Vec::new();
    let mut nics = Vec::new();
    for (i, ip) in ips.iter().enumerate() {
        let vm = format!("{name}_{:08x}", 0x1a2b_0000 + i);
        let vm_id =
            format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm}");
        // Every other member has a second, non-primary interface on another network.
        let ids: Vec<String> = (0..1 + i % 2).map(|k| nic_id(&vm, k)).collect();
        let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
        members.push(virtual_machine(sub, rg, &vm, Some(&set), &refs));
        nics.push(nic_with_id(&ids[0].to_lowercase(), ip, true, &[], Some(&vm_id)));
        if ids.len() > 1 {
            nics.push(nic_with_id(&ids[1], "10.99.0.4", false, &[], Some(&vm_id)));
        }
    }
    let mut everyone = members.clone();
    for (i, ip) in others.iter().enumerate() {
        let vm = format!("standalone{i}");
        let id = nic_id(&vm, 0);
        let vm_id =
            format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines/{vm}");
        everyone.push(virtual_machine(sub, rg, &vm, None, &[&id]));
        nics.push(nic_with_id(&id, ip, true, &[], Some(&vm_id)));
    }
    let vms = format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Compute/virtualMachines");
    let filter = format!("$filter='virtualMachineScaleSet/id' eq '{set}'");
    let mut routes =
        vec![(set.clone(), vec![Reply::ok(scale_set(sub, rg, name, Some("Flexible"), ips.len()).to_string())])];
    // Filtered: the members, page by page (each nextLink carries the filter, as Resource
    // Manager's do, and a skip token). Unfiltered: every VM of the group.
    // Later pages first: their queries also hold the filter the first page's route looks for.
    let pages: Vec<&[serde_json::Value]> = members.chunks(per_page.max(1)).collect();
    for (k, chunk) in pages.iter().enumerate().rev() {
        let here = if k == 0 { format!("{vms}?{filter}") } else { format!("{vms}?$skiptoken=page{k}") };
        let next = (k + 1 < pages.len()).then(|| {
            format!("{vms}?api-version=2024-07-01&%24filter={}&%24skiptoken=page{}", form_encode(&filter[8..]), k + 1)
        });
        routes.push((here, vec![Reply::ok(page(chunk, next.as_deref()))]));
    }
    if pages.is_empty() {
        routes.push((format!("{vms}?{filter}"), vec![Reply::ok(page(&[], None))]));
    }
    routes.push((vms, vec![Reply::ok(page(&everyone, None))]));
    routes.extend(paged(
        &format!("/subscriptions/{sub}/resourceGroups/{rg}/providers/Microsoft.Network/networkInterfaces"),
        &nics,
        per_page,
    ));
    routes
}

/// A listing at `path`, `per_page` items a page, the next pages at `path?$skiptoken=pageK`
/// (their routes first: the first page's, the bare path, would take any query).
fn paged(path: &str, items: &[serde_json::Value], per_page: usize) -> Vec<(String, Vec<Reply>)> {
    let pages: Vec<&[serde_json::Value]> = items.chunks(per_page.max(1)).collect();
    let mut routes = Vec::new();
    for (k, chunk) in pages.iter().enumerate().rev() {
        let next = (k + 1 < pages.len()).then(|| format!("{path}?api-version=2024-03-01&%24skiptoken=page{}", k + 1));
        let here = if k == 0 { path.to_string() } else { format!("{path}?$skiptoken=page{k}") };
        routes.push((here, vec![Reply::ok(page(chunk, next.as_deref()))]));
    }
    if routes.is_empty() {
        routes.push((path.to_string(), vec![Reply::ok(page(&[], None))]));
    }
    routes
}

/// `application/x-www-form-urlencoded` encoding of a query value.
fn form_encode(v: &str) -> String {
    let mut out = String::new();
    for b in v.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'*' => out.push(b as char),
            b' ' => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The decoded form of a query string (`+` is a space, `%XX` a byte).
fn form_decode(v: &str) -> String {
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                match u8::from_str_radix(std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz"), 16) {
                    Ok(x) => {
                        out.push(x);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A page of interfaces; `next` is a path on this server (becomes an absolute `nextLink`).
pub fn page(nics: &[serde_json::Value], next: Option<&str>) -> String {
    let mut v = serde_json::json!({ "value": nics });
    if let Some(n) = next {
        v["nextLink"] = serde_json::Value::from(format!("{{base}}{n}"));
    }
    v.to_string()
}

/// Routes in order: `path` or `path?TEXT` → answers given in turn (the last repeats).
type Script = Vec<(String, Vec<Reply>)>;

/// The running server.
pub struct FakeArm {
    /// Its address (loopback).
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeArm {
    /// Serves `script` on a loopback port: routes tried in order, each `path` (compared without
    /// case) or `path?TEXT` (the request's decoded query must contain TEXT) → answers given in
    /// turn (the last repeats). Requests no route takes get a 404 ARM error.
    pub async fn start<P: AsRef<str>>(script: Vec<(P, Vec<Reply>)>) -> std::io::Result<FakeArm> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let script: Arc<Mutex<Script>> =
            Arc::new(Mutex::new(script.into_iter().map(|(p, r)| (p.as_ref().to_string(), r)).collect()));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let task = tokio::spawn(async move {
            while let Ok((conn, _)) = listener.accept().await {
                tokio::spawn(answer(conn, addr, script.clone(), seen2.clone()));
            }
        });
        Ok(FakeArm { addr, seen, task })
    }

    /// Its base URL (`NETBLAST_ARM_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl Drop for FakeArm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn answer(
    mut conn: tokio::net::TcpStream,
    addr: SocketAddr,
    script: Arc<Mutex<Script>>,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    loop {
        // One request: headers only (GET), at most 64 KiB.
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            match conn.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
            if buf.len() > 64 << 10 {
                return;
            }
        }
        let text = String::from_utf8_lossy(&buf).to_string();
        let target = text.split_whitespace().nth(1).unwrap_or("/").to_string();
        let authorization = text
            .lines()
            .find_map(|l| l.split_once(':').filter(|(k, _)| k.eq_ignore_ascii_case("authorization")))
            .map(|(_, v)| v.trim().to_string());
        seen.lock().unwrap_or_else(|p| p.into_inner()).push(Seen { target: target.clone(), authorization });
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let (path, query) = (path.to_ascii_lowercase(), form_decode(query));
        let reply = {
            let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
            let route = s.iter_mut().find(|(key, _)| {
                let (p, q) = key.split_once('?').unwrap_or((key, ""));
                p.to_ascii_lowercase() == path && query.contains(q)
            });
            match route {
                Some((_, replies)) if replies.len() > 1 => replies.remove(0),
                Some((_, replies)) if !replies.is_empty() => replies[0].clone(),
                _ => Reply::error(404, "ResourceNotFound", &format!("no such resource: {path}")),
            }
        };
        if reply.hang {
            tokio::time::sleep(std::time::Duration::from_secs(3600)).await;
            return;
        }
        let body = reply.body.replace("{base}", &format!("http://{addr}"));
        let mut head = format!(
            "HTTP/1.1 {} X\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: {}\r\n",
            reply.status,
            body.len()
        );
        for (k, v) in &reply.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        if conn.write_all(head.as_bytes()).await.is_err() || conn.write_all(body.as_bytes()).await.is_err() {
            return;
        }
    }
}
