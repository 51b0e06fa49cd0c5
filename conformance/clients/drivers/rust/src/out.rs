//! stdout, owned by one writer task (records from many tasks never interleave within a line), the protocol's
//! error shape, and the driver's monotonic clock.

use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use serde_json::{json, Value};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;

static START: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds on the driver's monotonic clock (never jumps with the wall clock); hello reports it.
pub fn mono_ns() -> i64 {
    START.get_or_init(Instant::now).elapsed().as_nanos() as i64
}

/// Wall-clock ns: the load op log's clock, the same as Python's time.time_ns() on this machine.
pub fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

#[derive(Debug, Clone)]
pub struct Fail {
    pub kind: String,
    pub message: String,
    pub code: Option<u64>,
    pub err_code: Option<u64>,
}

impl Fail {
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        Fail {
            kind: kind.to_string(),
            message: message.into(),
            code: None,
            err_code: None,
        }
    }

    /// A JetStream API error: the server's status `code` and `err_code`, in the client's words.
    fn api(message: String, code: u64, err_code: u64) -> Self {
        Fail {
            kind: "api".into(),
            message,
            code: Some(code),
            err_code: Some(err_code),
        }
    }

    /// A client error as the protocol's kinds, keeping the client's own words: a JetStream API error anywhere in
    /// its source chain keeps its code and err_code.
    pub fn from_client(err: &(dyn std::error::Error + 'static)) -> Self {
        let message = describe(err);
        let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
        while let Some(e) = source {
            if let Some(api) = e.downcast_ref::<async_nats::jetstream::Error>() {
                if api.code() != 0 {
                    return Fail::api(message, api.code() as u64, api.error_code().0);
                }
            }
            if let Some(info) = e.downcast_ref::<async_nats::jetstream::context::ConsumerInfoError>() {
                use async_nats::jetstream::context::ConsumerInfoErrorKind as K;
                // the client turns exactly these server codes into these kinds (context.rs, From<Error>)
                match info.kind() {
                    K::NotFound => return Fail::api(message, 404, 10014),
                    K::StreamNotFound => return Fail::api(message, 404, 10059),
                    _ => {}
                }
            }
            // the client turns exactly 10148 / 10149 into these kinds (stream.rs, From<Error>)
            use async_nats::jetstream::stream::{ConsumerCreateStrictError, ConsumerUpdateError};
            if let Some(create) = e.downcast_ref::<ConsumerCreateStrictError>() {
                if create.kind() == async_nats::jetstream::stream::ConsumerCreateStrictErrorKind::AlreadyExists {
                    return Fail::api(message, 400, 10148);
                }
            }
            if let Some(update) = e.downcast_ref::<ConsumerUpdateError>() {
                if update.kind() == async_nats::jetstream::stream::ConsumerUpdateErrorKind::DoesNotExist {
                    return Fail::api(message, 400, 10149);
                }
            }
            source = e.source();
        }
        // Many of the client's error kinds hold the server's error as a value (e.g. JetStream(Error)), so it is no
        // source: its Display, "<description> (code N, error code M)", keeps the codes in the client's words.
        if let Some((code, err_code)) = api_codes(&message) {
            return Fail::api(message, code, err_code);
        }
        let lower = message.to_lowercase();
        let kind = if lower.contains("timed out") || lower.contains("timeout") {
            "timeout"
        } else if lower.contains("no responders") || lower.contains("disconnected") || lower.contains("connection") {
            "connection"
        } else if lower.contains("invalid") {
            "invalid"
        } else {
            "other"
        };
        Fail::new(kind, message)
    }

    fn to_json(&self) -> Value {
        json!({"kind": self.kind, "message": self.message, "code": self.code, "err_code": self.err_code})
    }
}

fn api_codes(message: &str) -> Option<(u64, u64)> {
    let at = message.rfind("(code ")?;
    let rest = &message[at + 6..];
    let (code, rest) = rest.split_once(", error code ")?;
    let err_code = rest.split(')').next()?;
    Some((code.trim().parse().ok()?, err_code.trim().parse().ok()?))
}

/// The client's error with its whole source chain, e.g. "missed idle heartbeat" or "jetstream request failed:
/// ... (code 404, error code 10014)".
pub fn describe(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(e) = source {
        let more = e.to_string();
        if !text.contains(&more) {
            text = format!("{text}: {more}");
        }
        source = e.source();
    }
    text
}

/// The client's boxed error (async_nats::Error), as the protocol's kinds.
pub fn boxed(err: async_nats::Error) -> Fail {
    Fail::from_client(err.as_ref())
}

impl<E: std::error::Error + 'static> From<E> for Fail {
    fn from(err: E) -> Self {
        Fail::from_client(&err)
    }
}

pub struct Output {
    tx: Mutex<Option<mpsc::UnboundedSender<String>>>,
}

impl Output {
    pub fn start() -> (Output, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<String>();
        let writer = tokio::spawn(async move {
            let mut stdout = tokio::io::BufWriter::new(tokio::io::stdout());
            while let Some(line) = rx.recv().await {
                let _ = stdout.write_all(line.as_bytes()).await;
                let _ = stdout.write_all(b"\n").await;
                if rx.is_empty() {
                    let _ = stdout.flush().await;
                }
            }
            let _ = stdout.flush().await;
        });
        (
            Output {
                tx: Mutex::new(Some(tx)),
            },
            writer,
        )
    }

    pub fn write(&self, record: &Value) {
        if let Some(tx) = self.tx.lock().unwrap().as_ref() {
            let _ = tx.send(record.to_string());
        }
    }

    pub fn respond(&self, id: i64, result: Result<Value, Fail>) {
        match result {
            Ok(value) => self.write(&json!({"id": id, "ok": true, "result": value})),
            Err(fail) => self.write(&json!({"id": id, "ok": false, "error": fail.to_json()})),
        }
    }

    /// Ends the output: records written afterwards are dropped, the writer flushes and finishes.
    pub fn close(&self) {
        self.tx.lock().unwrap().take();
    }
}
