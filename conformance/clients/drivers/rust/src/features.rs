//! Server features of 2.11/2.12 (PROTOCOL.md "Server features"): js_publish with PublishMessage::ttl, js_pause /
//! js_resume (Stream::pause_consumer / resume_consumer), js_group_fetch (Consumer::batch().group() on one handle
//! per session, stream and consumer); and consumer_add and publish_retrying.

use std::sync::Arc;

use async_nats::jetstream::consumer::{self, pull};
use async_nats::jetstream::message::PublishMessage;
use futures::StreamExt;
use serde_json::{json, Value};

use crate::kv::rfc3339;
use crate::out::describe;
use crate::session::API_TIMEOUT;
use crate::{b64_arg, f64_arg, i64_arg, seconds, str_arg, unsupported_op, Driver, Fail, OpResult};

pub const OPS: &[&str] = &["js_publish", "js_pause", "js_resume", "js_group_fetch", "consumer_add"];

pub type GroupHandle = Arc<consumer::Consumer<pull::Config>>;

pub async fn handle(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    match tokio::time::timeout(API_TIMEOUT.mul_f64(2.0), run(d, op, req)).await {
        Ok(result) => result,
        Err(_) => Err(Fail::new(
            "timeout",
            format!("{op} took longer than {:?}", API_TIMEOUT.mul_f64(2.0)),
        )),
    }
}

async fn run(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    match op {
        "js_publish" => {
            let mut message = PublishMessage::build().payload(b64_arg(req, "data_b64")?);
            if let Some(ttl) = f64_arg(req, "ttl_s").filter(|_| !d.mode("ttl-dropped")) {
                message = message.ttl(seconds(ttl));
            }
            let ack =
                s.js.send_publish(str_arg(req, "subject").to_string(), message)
                    .await?
                    .await?;
            Ok(json!({"seq": ack.sequence, "stream": ack.stream}))
        }
        "js_pause" => {
            let until =
                time::OffsetDateTime::parse(str_arg(req, "until"), &time::format_description::well_known::Rfc3339)
                    .map_err(|e| Fail::new("invalid", format!("until: {e}")))?;
            let stream = s.js.get_stream(str_arg(req, "stream")).await?;
            pause_state(stream.pause_consumer(str_arg(req, "consumer"), until).await?)
        }
        "js_resume" => {
            if d.mode("resume-ignored") {
                return Ok(json!({"paused": false}));
            }
            let stream = s.js.get_stream(str_arg(req, "stream")).await?;
            pause_state(stream.resume_consumer(str_arg(req, "consumer")).await?)
        }
        "js_group_fetch" => group_fetch(d, &s, req).await,
        _ => Err(unsupported_op(op)),
    }
}

fn pause_state(r: async_nats::jetstream::stream::PauseResponse) -> OpResult {
    let mut state = json!({"paused": r.paused});
    if r.pause_until.unix_timestamp() > 0 {
        state["pause_until"] = json!(rfc3339(r.pause_until));
    }
    Ok(state)
}

async fn group_fetch(d: &Arc<Driver>, s: &crate::session::Session, req: &Value) -> OpResult {
    let (group, batch, expires) = (
        str_arg(req, "group"),
        i64_arg(req, "batch").unwrap_or(0),
        f64_arg(req, "expires_s").unwrap_or(0.0),
    );
    if group.is_empty() || batch <= 0 || expires <= 0.0 {
        return Err(Fail::new("invalid", "js_group_fetch needs group, batch and expires_s"));
    }
    let key = format!("{}\0{}\0{}", s.id, str_arg(req, "stream"), str_arg(req, "consumer"));
    let kept = d.handles.lock().unwrap().get(&key).cloned();
    let handle = match kept.filter(|_| !d.mode("pin-forgotten")) {
        Some(h) => h,
        None => {
            let stream = s.js.get_stream(str_arg(req, "stream")).await?;
            let h = Arc::new(
                stream
                    .get_consumer::<pull::Config>(str_arg(req, "consumer"))
                    .await
                    .map_err(crate::out::boxed)?,
            );
            d.handles.lock().unwrap().insert(key, h.clone());
            h
        }
    };
    let mut builder = handle
        .batch()
        .max_messages(batch as usize)
        .expires(seconds(expires))
        .group(group);
    if let Some(min) = i64_arg(req, "min_pending").filter(|_| !d.mode("min-pending-dropped")) {
        builder = builder.min_pending(min.max(0) as usize);
    }
    let mut messages = builder.messages().await?;
    let mut deliveries = Vec::new();
    let mut ending = String::new();
    while let Some(item) = messages.next().await {
        match item {
            Ok(msg) => {
                let Ok(info) = msg.info() else { continue };
                let pin = msg
                    .headers
                    .as_ref()
                    .and_then(|h| h.get("Nats-Pin-Id"))
                    .map(|v| v.as_str().to_string())
                    .unwrap_or_default();
                deliveries.push(json!({"stream_seq": info.stream_sequence, "pin_id": pin}));
                if let Err(e) = msg.ack().await {
                    eprintln!("async-nats driver: js_group_fetch: ack failed: {e}");
                }
            }
            Err(e) => {
                ending = describe(e.as_ref());
                break;
            }
        }
    }
    if ending.is_empty() && (deliveries.len() as i64) < batch {
        ending = format!("Batch ended (None) after {} of {batch} messages", deliveries.len());
    }
    Ok(json!({"deliveries": deliveries, "error": ending}))
}

/// consumer_add: create (the client's create_consumer_strict), update (update_consumer), create_or_update
/// (create_consumer, which sends no action).
pub async fn consumer_add(d: &Arc<Driver>, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    // The request names only what it sets (server JSON names); consumer::Config's serde needs every field it
    // has no serde default for (deliver_policy, ack_policy ...), so the given keys go over Config::default()'s.
    let mut merged = serde_json::to_value(consumer::Config::default()).unwrap_or_else(|_| json!({}));
    if let (Some(base), Some(given)) = (merged.as_object_mut(), req.get("config").and_then(Value::as_object)) {
        for (key, value) in given {
            base.insert(key.clone(), value.clone());
        }
    }
    let config: consumer::Config =
        serde_json::from_value(merged).map_err(|e| Fail::new("invalid", format!("consumer_add: config: {e}")))?;
    let mut action = str_arg(req, "action").to_string();
    if d.mode("consumer-actions-rotated") {
        action = match action.as_str() {
            "create" => "update",
            "update" => "create",
            "create_or_update" => "create",
            other => other,
        }
        .to_string();
    }
    let stream = s.js.get_stream(str_arg(req, "stream")).await?;
    let consumer = match action.as_str() {
        "create" => stream.create_consumer_strict(config).await?,
        "update" => stream.update_consumer(config).await?,
        "create_or_update" => stream.create_consumer(config).await?,
        other => return Err(Fail::new("invalid", format!("consumer_add: unknown action {other:?}"))),
    };
    let info = consumer.cached_info();
    // consumer::Info is Deserialize only: its fields as the server's ConsumerInfo JSON names them
    Ok(json!({"info": {
        "stream_name": info.stream_name, "name": info.name, "created": rfc3339(info.created),
        "config": serde_json::to_value(&info.config).unwrap_or(Value::Null),
        "num_ack_pending": info.num_ack_pending, "num_redelivered": info.num_redelivered,
        "num_waiting": info.num_waiting, "num_pending": info.num_pending,
    }}))
}

/// publish_retrying: async-nats's JetStream publish has no retry on no responders.
pub async fn publish_retrying(_d: &Arc<Driver>, _req: &Value) -> OpResult {
    Err(Fail::new(
        "unsupported",
        "async-nats jetstream::Context::publish/send_publish have no retry option (ADR-22 retry attempts and wait): \
         src/jetstream/context.rs",
    ))
}
