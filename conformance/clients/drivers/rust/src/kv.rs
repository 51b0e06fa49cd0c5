//! v2: KV (ADR-8) and ADR-48's TTLs through async_nats::jetstream::kv::Store (PROTOCOL.md "v2: KV").

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use futures::TryStreamExt;
use serde_json::{json, Value};

use crate::session::Session;
use crate::{b64, b64_arg, f64_arg, i64_arg, seconds, str_arg, unsupported_op, Driver, Fail, OpResult};

pub const OPS: &[&str] = &[
    "kv_create",
    "kv_put",
    "kv_create_key",
    "kv_update",
    "kv_get",
    "kv_delete",
    "kv_purge",
    "kv_keys",
    "kv_history",
    "kv_status",
    "kv_delete_bucket",
];

const KV_TIMEOUT: Duration = Duration::from_secs(20);

pub fn operation(op: kv::Operation) -> &'static str {
    match op {
        kv::Operation::Put => "PUT",
        kv::Operation::Delete => "DEL",
        kv::Operation::Purge => "PURGE",
    }
}

pub fn rfc3339(t: time::OffsetDateTime) -> String {
    t.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

pub fn entry_json(e: &kv::Entry) -> Value {
    json!({
        "bucket": e.bucket, "key": e.key, "value_b64": b64(&e.value), "revision": e.revision,
        "operation": operation(e.operation), "created": rfc3339(e.created),
    })
}

/// The client's error for a bucket call; the server's 10059 (stream not found) is the protocol's `not_found`.
fn bucket_not_found<E: std::error::Error + 'static>(e: E) -> Fail {
    let f = Fail::from(e);
    if f.err_code == Some(10059) {
        return Fail {
            kind: "not_found".into(),
            ..f
        };
    }
    f
}

pub async fn store(s: &Session, bucket: &str) -> Result<kv::Store, Fail> {
    s.js.get_key_value(bucket).await.map_err(bucket_not_found)
}

pub async fn handle(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    match tokio::time::timeout(KV_TIMEOUT, run(d, op, req)).await {
        Ok(result) => result,
        Err(_) => Err(Fail::new("timeout", format!("{op} took longer than {KV_TIMEOUT:?}"))),
    }
}

async fn run(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    if op == "kv_bucket_names" {
        return Err(Fail::new(
            "unsupported",
            "async-nats has no key value bucket lister: jetstream::Context offers stream_names()/streams() only \
             (src/jetstream/context.rs)",
        ));
    }
    let bucket = str_arg(req, "bucket");
    if bucket.is_empty() {
        return Err(Fail::new("invalid", format!("{op} needs \"bucket\"")));
    }
    let ttl_ignored = d.mode("kv-ttl-ignored");
    match op {
        "kv_create" => {
            let mut config = kv::Config {
                bucket: bucket.to_string(),
                ..Default::default()
            };
            if let Some(history) = i64_arg(req, "history") {
                config.history = history;
            }
            if let Some(ttl) = f64_arg(req, "ttl_s") {
                config.max_age = seconds(ttl);
            }
            if let Some(markers) = f64_arg(req, "limit_marker_ttl_s").filter(|_| !ttl_ignored) {
                config.limit_markers = Some(seconds(markers));
            }
            s.js.create_key_value(config).await?;
            return Ok(json!({}));
        }
        "kv_delete_bucket" => {
            if d.mode("kv-buckets-misreport") {
                return Ok(json!({}));
            }
            s.js.delete_key_value(bucket).await.map_err(bucket_not_found)?;
            return Ok(json!({}));
        }
        _ => {}
    }
    let kv = store(&s, bucket).await?;
    let key = str_arg(req, "key");
    let key_ttl = f64_arg(req, "key_ttl_s").filter(|_| !ttl_ignored).map(seconds);
    match op {
        "kv_put" => {
            let value = b64_arg(req, "value_b64")?;
            let revision = if d.mode("kv-prefix-ignored") {
                // a client whose KV ignores the API prefix: the put goes to $KV.<bucket>.<key> itself
                s.js.publish(format!("$KV.{bucket}.{key}"), value)
                    .await?
                    .await?
                    .sequence
            } else {
                kv.put(key, value).await?
            };
            Ok(json!({"revision": revision}))
        }
        "kv_create_key" => {
            let value = b64_arg(req, "value_b64")?;
            let revision = match key_ttl {
                Some(ttl) => kv.create_with_ttl(key, value, ttl).await?,
                None => kv.create(key, value).await?,
            };
            Ok(json!({"revision": revision}))
        }
        "kv_update" => {
            let value = b64_arg(req, "value_b64")?;
            let last = req.get("last").and_then(Value::as_u64).unwrap_or(0);
            Ok(json!({"revision": kv.update(key, value, last).await?}))
        }
        "kv_get" => match kv.entry(key).await? {
            // Store::entry hands back delete and purge markers as entries; Store::get answers None for them.
            Some(e) if e.operation == kv::Operation::Put => Ok(json!({"entry": entry_json(&e)})),
            Some(e) if d.mode("kv-markers-as-values") => Ok(
                json!({"entry": {"bucket": bucket, "key": key, "value_b64": "", "revision": e.revision,
                    "operation": "PUT", "created": rfc3339(e.created)}}),
            ),
            Some(e) => Err(Fail::new(
                "not_found",
                format!(
                    "Store::get answers None: the key's latest entry is a {} marker",
                    operation(e.operation)
                ),
            )),
            None => Err(Fail::new(
                "not_found",
                "Store::entry answered None: the key has no value",
            )),
        },
        "kv_delete" => {
            kv.delete(key).await?;
            Ok(json!({}))
        }
        "kv_purge" => {
            match key_ttl {
                Some(ttl) => kv.purge_with_ttl(key, ttl).await?,
                None => kv.purge(key).await?,
            }
            Ok(json!({}))
        }
        "kv_keys" => {
            let filters: Vec<String> = req
                .get("filters")
                .and_then(Value::as_array)
                .map(|f| f.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
                .unwrap_or_default();
            if !filters.is_empty() && !d.mode("kv-keys-unfiltered") {
                return Err(Fail::new(
                    "unsupported",
                    "async-nats kv::Store::keys() takes no filter (src/jetstream/kv/mod.rs: it lists `>`)",
                ));
            }
            let keys: Vec<String> = kv.keys().await?.try_collect().await?;
            Ok(json!({"keys": keys}))
        }
        "kv_history" => {
            let entries: Vec<kv::Entry> = kv.history(key).await?.try_collect().await?;
            Ok(json!({"entries": entries.iter().map(entry_json).collect::<Vec<_>>()}))
        }
        "kv_status" => {
            let status = kv.status().await?;
            let markers = status.info.config.subject_delete_marker_ttl.unwrap_or_default();
            Ok(json!({
                "bucket": status.bucket(), "values": status.values(), "history": status.history(),
                "ttl_s": status.max_age().as_secs_f64(), "limit_marker_ttl_s": markers.as_secs_f64(),
            }))
        }
        _ => Err(unsupported_op(op)),
    }
}
