//! v3: watch (PROTOCOL.md "v3: watch"): kv_watch over kv::Store's watch calls and obj_watch over ObjectStore's.
//! What the client's watch stream yields is streamed in order; the end of the initial data (null) is placed from
//! what the client says, as described at each call.

use std::sync::Arc;

use async_nats::jetstream::kv;
use futures::{Stream, StreamExt};
use serde_json::{json, Value};

use crate::consumers::Subscription;
use crate::kv::{entry_json, store};
use crate::out::describe;
use crate::{bool_arg, mono_ns, str_arg, Driver, Fail, OpResult};

pub const OPS: &[&str] = &["kv_watch", "obj_watch"];

/// Where the driver puts the null record (the client has no end-of-initial-data record of its own).
#[derive(Clone, Copy, PartialEq)]
enum EndOfData {
    /// Nothing is replayed by construction (DeliverPolicy::New): null first.
    First,
    /// Right after the first entry the client flags `seen_current` (kv::Entry: "Set to true after all
    /// historical messages have been received"); with nothing to replay that is the first update.
    AfterSeenCurrent,
    /// The client gives no signal at all (ObjectStore's Watch yields bare ObjectInfos): no null.
    Never,
}

pub async fn kv_watch(d: &Arc<Driver>, req: &Value) -> OpResult {
    let bucket = str_arg(req, "bucket");
    if bucket.is_empty() {
        return Err(Fail::new("invalid", "kv_watch needs \"bucket\""));
    }
    let (history, updates_only) = (bool_arg(req, "include_history"), bool_arg(req, "updates_only"));
    if bool_arg(req, "meta_only") && !d.mode("kv-watch-meta-ignored") {
        return Err(Fail::new(
            "unsupported",
            "meta_only: async-nats kv::Store has no meta-only (headers-only) watch; only keys() asks for headers \
             (src/jetstream/kv/mod.rs)",
        ));
    }
    if bool_arg(req, "ignore_deletes") {
        return Err(Fail::new(
            "unsupported",
            "ignore_deletes: async-nats kv::Store's watch calls take no options (watch, watch_with_history, \
             watch_from_revision, watch_many...; src/jetstream/kv/mod.rs)",
        ));
    }
    if history && updates_only {
        return Err(Fail::new(
            "invalid",
            "include_history with updates_only: the client's watch calls each take one",
        ));
    }
    let keys: Vec<String> = req
        .get("keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .filter(|k: &Vec<String>| !k.is_empty())
        .unwrap_or_else(|| vec![">".to_string()]);
    let s = d.session(str_arg(req, "session"))?;
    let sub = Subscription::register(d, &s.id, str_arg(req, "sub"), false)?;
    let setup = async {
        let kv = store(&s, bucket).await?;
        let one = keys.len() == 1;
        let watch = match (history, updates_only, one) {
            // include_history: every retained revision, read from revision 1 (the client has no IncludeHistory)
            (true, _, true) => kv.watch_from_revision(&keys[0], 1).await?,
            (true, _, false) => {
                return Err(Fail::new(
                    "unsupported",
                    "include_history over several keys: async-nats has watch_from_revision for one key only",
                ))
            }
            (_, true, true) => kv.watch(&keys[0]).await?,
            (_, true, false) => kv.watch_many(keys.clone()).await?,
            (_, _, true) => kv.watch_with_history(&keys[0]).await?,
            (_, _, false) => kv.watch_many_with_history(keys.clone()).await?,
        };
        Ok::<_, Fail>(watch)
    };
    let watch = sub.set_up("the client's watch", setup).await?;
    let end = if updates_only {
        EndOfData::First
    } else {
        EndOfData::AfterSeenCurrent
    };
    let markers_as_values = d.mode("kv-markers-as-values");
    spawn_watch(sub, watch, "entry", end, move |e: &kv::Entry| {
        let mut record = entry_json(e);
        if markers_as_values {
            record["operation"] = json!("PUT");
        }
        (record, e.seen_current)
    });
    Ok(json!({}))
}

pub async fn obj_watch(d: &Arc<Driver>, req: &Value) -> OpResult {
    let obj = req.get("obj").cloned().unwrap_or(Value::Null);
    let bucket = str_arg(&obj, "bucket");
    if bucket.is_empty() {
        return Err(Fail::new("invalid", "obj_watch needs \"obj\" with a \"bucket\""));
    }
    if bool_arg(&obj, "meta_only") {
        return Err(Fail::new("invalid", "obj_watch has no meta_only"));
    }
    if bool_arg(&obj, "ignore_deletes") {
        return Err(Fail::new(
            "unsupported",
            "ignore_deletes: async-nats ObjectStore has watch() and watch_with_history() only, with no options \
             (src/jetstream/object_store/mod.rs)",
        ));
    }
    let updates_only = bool_arg(&obj, "updates_only");
    if bool_arg(&obj, "include_history") {
        return Err(Fail::new(
            "unsupported",
            "include_history: async-nats ObjectStore::watch_with_history() replays each object's last info \
             (DeliverPolicy::LastPerSubject), not every revision (src/jetstream/object_store/mod.rs)",
        ));
    }
    let s = d.session(str_arg(req, "session"))?;
    let sub = Subscription::register(d, &s.id, str_arg(&obj, "sub"), false)?;
    let setup = async {
        let store = crate::objectstore::store(&s, bucket).await?;
        // watch(): DeliverPolicy::New; watch_with_history(): each object's last info (nats.go's default watch)
        let watch = if updates_only {
            store.watch().await?
        } else {
            store.watch_with_history().await?
        };
        Ok::<_, Fail>(watch)
    };
    let watch = sub.set_up("the client's watch", setup).await?;
    // ObjectInfo carries no flag at all, so even an updates-only watch (nothing replayed) has no null
    let end = EndOfData::Never;
    spawn_watch(
        sub,
        watch,
        "info",
        end,
        |info: &async_nats::jetstream::object_store::ObjectInfo| {
            (serde_json::to_value(info).unwrap_or(Value::Null), false)
        },
    );
    Ok(json!({}))
}

/// Streams what the client's watch yields until it ends; `encode` gives the record's payload and whether the
/// client flags it as current (the end of the initial data).
fn spawn_watch<S, T, E>(
    sub: Arc<Subscription>,
    mut watch: S,
    field: &'static str,
    end: EndOfData,
    encode: impl Fn(&T) -> (Value, bool) + Send + 'static,
) where
    S: Stream<Item = Result<T, E>> + Unpin + Send + 'static,
    T: Send + 'static,
    E: std::error::Error + Send + 'static,
{
    let d = sub.d.clone();
    let runner = sub.clone();
    let task = tokio::spawn(async move {
        let mut update_seen = false;
        let mut end_sent = false;
        let emit = |payload: Value, update_seen: &mut bool| {
            runner.write_locked(|| {
                let is_end = payload.is_null();
                if is_end && d.mode("watch-no-end-of-data") {
                    return None;
                }
                if !is_end && !*update_seen && d.mode("watch-drop-first") {
                    *update_seen = true;
                    return None;
                }
                *update_seen |= !is_end;
                Some(json!({"type": "watch", "sub": runner.id, field: payload, "at_ns": mono_ns()}))
            });
        };
        if end == EndOfData::First {
            emit(Value::Null, &mut update_seen);
            end_sent = true;
        }
        while let Some(item) = watch.next().await {
            match item {
                Ok(value) => {
                    let (payload, current) = encode(&value);
                    emit(payload, &mut update_seen);
                    if current && !end_sent && end == EndOfData::AfterSeenCurrent {
                        emit(Value::Null, &mut update_seen);
                        end_sent = true;
                    }
                }
                Err(e) => runner.d.event(
                    &runner.session,
                    &runner.id,
                    "error",
                    &format!("watcher error: {}", describe(&e)),
                ),
            }
        }
        runner.ended(&format!(
            "the client's {field} watch stream ended (yielded None) without stop"
        ));
    });
    sub.started(task.abort_handle(), false);
}
