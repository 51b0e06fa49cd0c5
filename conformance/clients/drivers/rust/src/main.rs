//! The jetcheck driver for the Rust client async-nats: protocol v3 (conformance/clients/drivers/PROTOCOL.md).
//!
//! One JSON object per line in on stdin (requests), out on stdout (responses, deliveries, events, watch and load
//! records). Every request runs in its own tokio task; one writer task owns stdout so lines never interleave.
//! stderr is a log that never carries credentials.

mod consumers;
mod features;
mod kv;
mod load;
mod objectstore;
mod out;
mod session;
mod watch;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, BufReader};

pub use out::{mono_ns, Fail, Output};

pub const PROTOCOL_VERSION: u64 = 3;
pub const CLIENT: &str = "async-nats";
// Cargo.lock pins it; build.rs reads the resolved version from Cargo.lock so hello tells the exact release.
pub const CLIENT_VERSION: &str = env!("ASYNC_NATS_VERSION");
pub const RUSTC_VERSION: &str = env!("DRIVER_RUSTC_VERSION");

pub type OpResult = Result<Value, Fail>;

/// The misbehave modes this driver knows (PROTOCOL.md `misbehave` and the modes of each section). Two change nothing
/// here: `status-misreport` (obj_status is unsupported: async-nats's ObjectStore has no status call) and
/// `publish-no-retry` (publish_retrying is unsupported: async-nats has no publish retry); their rules are na for it.
pub const KNOWN_MODES: &[&str] = &[
    "swallow-missed-heartbeat",
    "chatty-missed-heartbeat",
    "terminal-on-missed-heartbeat",
    "duplicate-delivery",
    "drop-deliveries-after-reset",
    "watch-no-end-of-data",
    "watch-drop-first",
    "bind-any-queue",
    "kv-ttl-ignored",
    "kv-markers-as-values",
    "kv-keys-unfiltered",
    "kv-buckets-misreport",
    "kv-watch-meta-ignored",
    "kv-prefix-ignored",
    "ttl-dropped",
    "resume-ignored",
    "pin-forgotten",
    "min-pending-dropped",
    "seal-ignored",
    "status-misreport",
    "consumer-actions-rotated",
    "publish-no-retry",
];

pub struct Driver {
    pub out: Output,
    pub sessions: Mutex<HashMap<String, Arc<session::Session>>>,
    pub subs: Mutex<HashMap<String, Arc<consumers::Subscription>>>,
    pub modes: Mutex<HashSet<String>>,
    pub load_runs: Mutex<HashMap<String, load::Run>>,
    pub handles: Mutex<HashMap<String, features::GroupHandle>>,
    chatty: Mutex<bool>,
}

impl Driver {
    pub fn mode(&self, name: &str) -> bool {
        self.modes.lock().unwrap().contains(name)
    }

    pub fn session(&self, id: &str) -> Result<Arc<session::Session>, Fail> {
        self.sessions
            .lock()
            .unwrap()
            .get(id)
            .cloned()
            .ok_or_else(|| Fail::new("invalid", format!("no session {id:?}")))
    }

    fn ops() -> Vec<&'static str> {
        let mut ops = vec![
            "hello",
            "connect",
            "close",
            "ping",
            "ordered",
            "push",
            "consume",
            "fetch",
            "stop",
            "misbehave",
            "shutdown",
        ];
        ops.extend_from_slice(kv::OPS);
        ops.extend_from_slice(objectstore::OPS);
        ops.extend_from_slice(watch::OPS);
        ops.extend_from_slice(features::OPS);
        ops.extend_from_slice(load::OPS);
        ops
    }

    fn hello(&self) -> Value {
        json!({
            "protocol": PROTOCOL_VERSION,
            "client": CLIENT,
            "version": CLIENT_VERSION,
            "runtime": RUSTC_VERSION,
            "mono_ns": mono_ns(),
            "ops": Self::ops(),
            "libraries": {"tokio": env!("TOKIO_VERSION")},
        })
    }

    async fn handle(self: &Arc<Self>, op: &str, req: &Value) -> OpResult {
        match op {
            "hello" => Ok(self.hello()),
            "connect" => session::connect(self, req).await,
            "close" => session::close(self, str_arg(req, "session")).await,
            "ping" => session::ping(self, str_arg(req, "session")).await,
            "ordered" => consumers::ordered(self, req).await,
            "push" => consumers::push(self, req).await,
            "consume" => consumers::consume(self, req).await,
            "fetch" => consumers::fetch(self, req).await,
            "stop" => consumers::stop(self, str_arg(req, "sub")).await,
            "misbehave" => self.misbehave(req),
            "consumer_add" => features::consumer_add(self, req).await,
            "publish_retrying" => features::publish_retrying(self, req).await,
            "kv_watch" => watch::kv_watch(self, req).await,
            "obj_watch" => watch::obj_watch(self, req).await,
            _ if op.starts_with("js_") => features::handle(self, op, req).await,
            _ if op.starts_with("load_") => load::handle(self, op, req).await,
            _ if op.starts_with("kv_") => kv::handle(self, op, req).await,
            _ if op.starts_with("obj_") => objectstore::handle(self, op, req).await,
            _ => Err(unsupported_op(op)),
        }
    }

    fn misbehave(self: &Arc<Self>, req: &Value) -> OpResult {
        let modes: Vec<String> = req
            .get("modes")
            .and_then(Value::as_array)
            .map(|m| m.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
            .unwrap_or_default();
        if let Some(unknown) = modes.iter().find(|m| !KNOWN_MODES.contains(&m.as_str())) {
            return Err(Fail::new("invalid", format!("unknown misbehave mode {unknown:?}")));
        }
        self.modes.lock().unwrap().extend(modes.iter().cloned());
        if modes.iter().any(|m| m == "chatty-missed-heartbeat") {
            let mut chatty = self.chatty.lock().unwrap();
            if !*chatty {
                *chatty = true;
                tokio::spawn(consumers::chatter(self.clone()));
            }
        }
        eprintln!("async-nats driver: misbehaving from now on: {modes:?}");
        Ok(json!({}))
    }
}

pub fn unsupported_op(op: &str) -> Fail {
    Fail::new(
        "unsupported",
        format!("op {op:?} is not implemented by the async-nats driver (protocol v{PROTOCOL_VERSION})"),
    )
}

// --- request arguments ----------------------------------------------------------------------------------------

pub fn str_arg<'a>(req: &'a Value, key: &str) -> &'a str {
    req.get(key).and_then(Value::as_str).unwrap_or("")
}

pub fn f64_arg(req: &Value, key: &str) -> Option<f64> {
    req.get(key).and_then(Value::as_f64)
}

pub fn i64_arg(req: &Value, key: &str) -> Option<i64> {
    req.get(key).and_then(Value::as_i64)
}

pub fn bool_arg(req: &Value, key: &str) -> bool {
    req.get(key).and_then(Value::as_bool).unwrap_or(false)
}

pub fn seconds(s: f64) -> std::time::Duration {
    std::time::Duration::from_secs_f64(s.max(0.0))
}

pub fn b64_arg(req: &Value, key: &str) -> Result<bytes::Bytes, Fail> {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD
        .decode(str_arg(req, key))
        .map(bytes::Bytes::from)
        .map_err(|e| Fail::new("invalid", format!("{key}: {e}")))
}

pub fn b64(data: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(data)
}

// ---------------------------------------------------------------------------------------------------------------

#[tokio::main]
async fn main() {
    mono_ns(); // the clock's origin: the driver's start
    let (out, writer) = Output::start();
    let driver = Arc::new(Driver {
        out,
        sessions: Mutex::default(),
        subs: Mutex::default(),
        modes: Mutex::default(),
        load_runs: Mutex::default(),
        handles: Mutex::default(),
        chatty: Mutex::new(false),
    });
    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    let mut tasks = tokio::task::JoinSet::new();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let req: Value = match serde_json::from_str(line) {
            Ok(v) => v,
            Err(e) => {
                eprintln!(
                    "async-nats driver: unreadable request line ({} bytes) ignored: {e}",
                    line.len()
                );
                continue;
            }
        };
        let Some(id) = req.get("id").and_then(Value::as_i64) else {
            eprintln!("async-nats driver: a request without an id ignored");
            continue;
        };
        let Some(op) = req.get("op").and_then(Value::as_str).map(str::to_string) else {
            driver
                .out
                .respond(id, Err(Fail::new("invalid", "a request's \"op\" must be a string")));
            continue;
        };
        if op == "shutdown" {
            while tasks.join_next().await.is_some() {}
            driver.out.respond(id, Ok(json!({})));
            break;
        }
        let d = driver.clone();
        tasks.spawn(async move {
            let result = d.handle(&op, &req).await;
            d.out.respond(id, result);
        });
    }
    while tasks.join_next().await.is_some() {}
    let ids: Vec<String> = driver.sessions.lock().unwrap().keys().cloned().collect();
    for id in ids {
        let _ = session::close(&driver, &id).await;
    }
    driver.out.close();
    let _ = writer.await;
    std::process::exit(0);
}
