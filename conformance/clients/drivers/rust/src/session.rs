//! Sessions: one async-nats Client and its JetStream context each (connect, close, ping). Credentials arrive only
//! inside `connect` and are never logged.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream;
use serde_json::{json, Value};

use futures::StreamExt;

use crate::out::describe;
use crate::{f64_arg, str_arg, Driver, Fail, OpResult};

pub const API_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Session {
    pub id: String,
    pub client: async_nats::Client,
    pub js: jetstream::Context,
    pub api_prefix: String,
}

fn credential<'a>(req: &'a Value, key: &str) -> &'a str {
    req.get("credentials")
        .and_then(|c| c.get(key))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub async fn connect(d: &Arc<Driver>, req: &Value) -> OpResult {
    let id = str_arg(req, "session").to_string();
    let url = str_arg(req, "url");
    if id.is_empty() || url.is_empty() {
        return Err(Fail::new("invalid", "connect needs session and url"));
    }
    let wait = Duration::from_secs_f64(f64_arg(req, "reconnect_wait_s").unwrap_or(0.1).max(0.0));
    let events_driver = d.clone();
    let events_id = id.clone();
    let mut options = async_nats::ConnectOptions::new()
        .name("jetcheck-driver-rust")
        // None: reconnect forever, as the protocol asks
        .max_reconnects(None)
        // The protocol asks for reconnect_wait_s between attempts, not the client's growing backoff.
        .reconnect_delay_callback(move |_attempts| wait)
        .event_callback(move |event| {
            let d = events_driver.clone();
            let id = events_id.clone();
            async move {
                match event {
                    async_nats::Event::ServerError(_)
                    | async_nats::Event::ClientError(_)
                    | async_nats::Event::SlowConsumer(_) => {
                        d.event(&id, "", "error", &format!("async_nats::Event: {event}"))
                    }
                    other => eprintln!("async-nats driver: session {id}: {other}"),
                }
            }
        });
    let (user, token) = (credential(req, "user"), credential(req, "token"));
    if !user.is_empty() {
        options = options.user_and_password(user.to_string(), credential(req, "password").to_string());
    }
    if !token.is_empty() {
        options = options.token(token.to_string());
    }
    let seed_file = credential(req, "nkey_seed");
    if !seed_file.is_empty() {
        let seed = std::fs::read_to_string(seed_file)
            .map_err(|e| Fail::new("invalid", format!("nkey seed file unusable: {e}")))?;
        let seed = seed
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with('S'))
            .unwrap_or("")
            .to_string();
        options = options.nkey(seed);
    }
    let creds = credential(req, "creds");
    if !creds.is_empty() {
        options = options
            .credentials_file(creds)
            .await
            .map_err(|e| Fail::new("invalid", format!("creds file unusable: {e}")))?;
    }
    let ca = credential(req, "tls_ca");
    if !ca.is_empty() {
        options = options.add_root_certificates(ca.into()).require_tls(true);
    }
    let (cert, key) = (credential(req, "tls_cert"), credential(req, "tls_key"));
    if !cert.is_empty() || !key.is_empty() {
        options = options.add_client_certificate(cert.into(), key.into());
    }
    let inbox = str_arg(req, "inbox_prefix");
    if !inbox.is_empty() {
        options = options.custom_inbox_prefix(inbox);
    }
    let client = options.connect(url).await.map_err(|e| {
        let mut f = Fail::from_client(&e);
        if f.kind == "other" {
            f.kind = "connection".into();
        }
        f
    })?;
    let api_prefix = str_arg(req, "api_prefix").to_string();
    let js = if api_prefix.is_empty() {
        jetstream::new(client.clone())
    } else {
        jetstream::with_prefix(client.clone(), &api_prefix)
    };
    let session = Arc::new(Session {
        id: id.clone(),
        client,
        js,
        api_prefix,
    });
    let old = d.sessions.lock().unwrap().insert(id.clone(), session);
    if let Some(old) = old {
        let _ = old.client.drain().await;
    }
    eprintln!("async-nats driver: session {id}: connected");
    Ok(json!({}))
}

/// Answers once the connection made a round trip to the server: jetcheck asks after a silence, to tell a quiet
/// client from one that lost its server. Client::flush() only writes the client's buffer to the socket, and the
/// client has no ping call, so the round trip is a message to an inbox of its own, which the server echoes back.
pub async fn ping(d: &Arc<Driver>, id: &str) -> OpResult {
    let s = d.session(id)?;
    let round_trip = async {
        let inbox = s.client.new_inbox();
        let mut echo = s
            .client
            .subscribe(inbox.clone())
            .await
            .map_err(|e| Fail::new("connection", describe(&e)))?;
        s.client
            .publish(inbox, bytes::Bytes::new())
            .await
            .map_err(|e| Fail::new("connection", describe(&e)))?;
        s.client
            .flush()
            .await
            .map_err(|e| Fail::new("connection", describe(&e)))?;
        let back = echo.next().await;
        let _ = echo.unsubscribe().await;
        back.map(|_| json!({}))
            .ok_or_else(|| Fail::new("connection", "the client closed the subscription"))
    };
    match tokio::time::timeout(API_TIMEOUT, round_trip).await {
        Ok(result) => result,
        Err(_) => Err(Fail::new(
            "timeout",
            format!("no round trip to the server within {API_TIMEOUT:?}"),
        )),
    }
}

pub async fn close(d: &Arc<Driver>, id: &str) -> OpResult {
    let session = d.sessions.lock().unwrap().remove(id);
    let Some(session) = session else {
        return Err(Fail::new("invalid", format!("no session {id:?}")));
    };
    let mine: Vec<_> = {
        let mut subs = d.subs.lock().unwrap();
        let ids: Vec<String> = subs
            .iter()
            .filter(|(_, s)| s.session == id)
            .map(|(k, _)| k.clone())
            .collect();
        ids.into_iter().filter_map(|k| subs.remove(&k)).collect()
    };
    for sub in mine {
        sub.stop();
    }
    let _ = tokio::time::timeout(API_TIMEOUT, session.client.drain()).await;
    Ok(json!({}))
}
