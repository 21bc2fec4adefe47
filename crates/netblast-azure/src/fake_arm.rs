//! A stand-in for Azure Resource Manager on loopback, for tests: it answers the two network
//! interface listings discovery uses with what a test scripted, shaped like the real API
//! (`value` and an absolute `nextLink`, ARM error bodies, `Retry-After`), and records every
//! request it got.

use std::collections::HashMap;
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

/// A network interface as Resource Manager lists it (JSON).
pub fn nic(name: &str, ip: &str, primary: bool, tags: &[(&str, &str)]) -> serde_json::Value {
    let tags: serde_json::Map<String, serde_json::Value> =
        tags.iter().map(|(k, v)| (k.to_string(), serde_json::Value::from(*v))).collect();
    serde_json::json!({
        "name": name,
        "id": format!("/subscriptions/s/resourceGroups/rg/providers/Microsoft.Network/networkInterfaces/{name}"),
        "type": "Microsoft.Network/networkInterfaces",
        "location": "westeurope",
        "tags": tags,
        "properties": {
            "primary": primary,
            "ipConfigurations": [
                { "name": "secondary", "properties": { "privateIPAddress": "192.0.2.200", "primary": false } },
                { "name": "ipconfig1", "properties": { "privateIPAddress": ip, "primary": true,
                                                       "privateIPAllocationMethod": "Dynamic" } }
            ]
        }
    })
}

/// A page of interfaces; `next` is a path on this server (becomes an absolute `nextLink`).
pub fn page(nics: &[serde_json::Value], next: Option<&str>) -> String {
    let mut v = serde_json::json!({ "value": nics });
    if let Some(n) = next {
        v["nextLink"] = serde_json::Value::from(format!("{{base}}{n}"));
    }
    v.to_string()
}

type Script = HashMap<String, Vec<Reply>>;

/// The running server.
pub struct FakeArm {
    /// Its address (loopback).
    pub addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeArm {
    /// Serves `script` (path, without query → answers given in turn; the last repeats) on a
    /// loopback port. Unknown paths get a 404 ARM error.
    pub async fn start(script: Vec<(&str, Vec<Reply>)>) -> std::io::Result<FakeArm> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let script: Arc<Mutex<Script>> =
            Arc::new(Mutex::new(script.into_iter().map(|(p, r)| (p.to_string(), r)).collect()));
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
        let path = target.split('?').next().unwrap_or("").to_ascii_lowercase();
        let reply = {
            let mut s = script.lock().unwrap_or_else(|p| p.into_inner());
            match s.iter_mut().find(|(p, _)| p.to_ascii_lowercase() == path) {
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
