//! v2: object store (PROTOCOL.md "v2: object store") over async_nats::jetstream::object_store::ObjectStore.
//! Arguments arrive under "obj"; infos leave as the client's ObjectInfo, serialised as the client does (ADR-20).

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::object_store::{self, ObjectMetadata, ObjectStore, UpdateMetadata};
use async_nats::HeaderMap;
use futures::TryStreamExt;
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;

use crate::session::Session;
use crate::{b64, b64_arg, str_arg, unsupported_op, Driver, Fail, OpResult};

pub const OPS: &[&str] = &[
    "obj_create",
    "obj_put",
    "obj_get",
    "obj_info",
    "obj_list",
    "obj_delete",
    "obj_update_meta",
    "obj_add_link",
    "obj_seal",
];

const TIMEOUT: Duration = Duration::from_secs(30);

/// The client's error under the protocol's kinds, by the client's own error kind (its Debug name): NotFound is
/// `not_found`, AlreadyExists/NameAlreadyInUse `exists`; JetStream API errors keep `api`.
pub fn obj_error<K>(err: async_nats::error::Error<K>) -> Fail
where
    K: Debug + Clone + PartialEq + std::fmt::Display + 'static,
{
    let kind = format!("{:?}", err.kind());
    let mut fail = Fail::from_client(&err);
    fail.message = format!("{kind}: {}", fail.message);
    match kind.as_str() {
        "NotFound" => fail.kind = "not_found".into(),
        "AlreadyExists" | "NameAlreadyInUse" => fail.kind = "exists".into(),
        _ if fail.err_code == Some(10059) => fail.kind = "not_found".into(),
        _ => {}
    }
    fail
}

pub async fn store(s: &Session, bucket: &str) -> Result<ObjectStore, Fail> {
    s.js.get_object_store(bucket).await.map_err(obj_error)
}

pub async fn handle(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    match tokio::time::timeout(TIMEOUT, run(d, op, req)).await {
        Ok(result) => result,
        Err(_) => Err(Fail::new("timeout", format!("{op} took longer than {TIMEOUT:?}"))),
    }
}

fn info_json(info: &object_store::ObjectInfo) -> Value {
    serde_json::to_value(info).unwrap_or(Value::Null)
}

async fn run(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    let args = req.get("obj").cloned().unwrap_or(Value::Null);
    let bucket = str_arg(&args, "bucket");
    if bucket.is_empty() {
        return Err(Fail::new("invalid", format!("{op} needs \"obj\" with a \"bucket\"")));
    }
    if op == "obj_create" {
        let config = object_store::Config {
            bucket: bucket.to_string(),
            ..Default::default()
        };
        s.js.create_object_store(config).await.map_err(obj_error)?;
        return Ok(json!({}));
    }
    if op == "obj_status" {
        return Err(Fail::new(
            "unsupported",
            "async-nats ObjectStore has no status call (src/jetstream/object_store/mod.rs: get, put, delete, info, \
             watch, list, seal, update_metadata, add_link, add_bucket_link)",
        ));
    }
    let mut store = store(&s, bucket).await?;
    let name = str_arg(&args, "name");
    match op {
        "obj_put" => {
            let data = b64_arg(&args, "data_b64")?;
            let meta = ObjectMetadata {
                name: name.to_string(),
                chunk_size: args.get("chunk_size").and_then(Value::as_u64).map(|c| c as usize),
                ..Default::default()
            };
            let info = store.put(meta, &mut data.as_ref()).await.map_err(obj_error)?;
            Ok(json!({"info": info_json(&info)}))
        }
        "obj_get" => {
            let mut object = store.get(name).await.map_err(obj_error)?;
            let mut data = Vec::new();
            if let Err(e) = object.read_to_end(&mut data).await {
                let text = crate::out::describe(&e);
                let kind = if text.to_lowercase().contains("digest") {
                    "digest_mismatch"
                } else {
                    "other"
                };
                return Err(Fail::new(kind, text));
            }
            Ok(json!({"data_b64": b64(&data)}))
        }
        "obj_info" => {
            // ObjectStore::info has no show-deleted option: asked plainly, as the protocol says
            let info = store.info(name).await.map_err(obj_error)?;
            Ok(json!({"info": info_json(&info)}))
        }
        "obj_list" => {
            let infos: Vec<object_store::ObjectInfo> = store
                .list()
                .await
                .map_err(obj_error)?
                .try_collect()
                .await
                .map_err(obj_error)?;
            Ok(json!({"infos": infos.iter().map(info_json).collect::<Vec<_>>()}))
        }
        "obj_delete" => {
            store.delete(name).await.map_err(obj_error)?;
            Ok(json!({}))
        }
        "obj_update_meta" => {
            let Some(meta) = args.get("meta").filter(|m| m.is_object()) else {
                return Err(Fail::new("invalid", "obj_update_meta needs \"meta\""));
            };
            let description = str_arg(meta, "description");
            let mut headers = HeaderMap::new();
            if let Some(given) = meta.get("headers").and_then(Value::as_object) {
                for (key, values) in given {
                    for value in values.as_array().into_iter().flatten().filter_map(Value::as_str) {
                        headers.append(key.as_str(), value);
                    }
                }
            }
            let update = UpdateMetadata {
                name: str_arg(meta, "name").to_string(),
                description: (!description.is_empty()).then(|| description.to_string()),
                headers: (!headers.is_empty()).then_some(headers),
                ..Default::default()
            };
            store.update_metadata(name, update).await.map_err(obj_error)?;
            Ok(json!({}))
        }
        "obj_add_link" => {
            let target = store.info(str_arg(&args, "target")).await.map_err(obj_error)?;
            let info = store.add_link(name, &target).await.map_err(obj_error)?;
            Ok(json!({"info": info_json(&info)}))
        }
        "obj_seal" => {
            if d.mode("seal-ignored") {
                return Ok(json!({}));
            }
            store.seal().await.map_err(obj_error)?;
            Ok(json!({}))
        }
        _ => Err(unsupported_op(op)),
    }
}
