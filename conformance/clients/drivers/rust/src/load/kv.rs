//! KV: put then get of the same key, on a schedule.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};
use tokio::sync::{watch, Semaphore};

use crate::out::wall_ns;
use crate::{f64_arg, i64_arg, str_arg, Driver, Fail, OpResult};

use super::schedule::{until_due, Due, OpenLoop};
use super::{batch_period, flush_every, register, Logged, Run, OVERFLOW};

const KV_PUT: i64 = 0;
const KV_GET: i64 = 1;
const KV_OP_TIMEOUT: Duration = Duration::from_secs(10);

pub struct KvRun {
    logged: Logged,
    store: async_nats::jetstream::kv::Store,
    keys: Vec<String>,
    payload: bytes::Bytes,
    stopping: watch::Sender<bool>,
    last_put: AtomicI64, // the key whose put was acknowledged last; -1: none yet
    scheduled: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

pub(super) async fn load_kv(d: &Arc<Driver>, req: &Value) -> OpResult {
    let sub = str_arg(req, "sub").to_string();
    let keys: Vec<String> = req
        .get("keys")
        .and_then(Value::as_array)
        .map(|k| k.iter().filter_map(|v| v.as_str().map(str::to_string)).collect())
        .unwrap_or_default();
    let (max_inflight, rate) = (
        i64_arg(req, "max_inflight").unwrap_or(0),
        f64_arg(req, "rate").unwrap_or(0.0),
    );
    let size = i64_arg(req, "payload_size").unwrap_or(0);
    if sub.is_empty()
        || str_arg(req, "bucket").is_empty()
        || keys.is_empty()
        || max_inflight < 1
        || rate < 0.0
        || size < 0
    {
        return Err(Fail::new(
            "invalid",
            "load_kv needs sub, bucket, keys, max_inflight >= 1, rate >= 0, payload_size >= 0",
        ));
    }
    let s = d.session(str_arg(req, "session"))?;
    let store = crate::kv::store(&s, str_arg(req, "bucket")).await?;
    let run = Arc::new(KvRun {
        logged: Logged::new(d, &sub, false),
        store,
        keys,
        payload: bytes::Bytes::from(vec![b'x'; size as usize]),
        stopping: watch::channel(false).0,
        last_put: AtomicI64::new(-1),
        scheduled: Mutex::default(),
    });
    register(d, &sub, Run::Kv(run.clone()))?;
    let started = wall_ns();
    let flush = run.clone();
    *run.logged.flusher.lock().unwrap() = Some(flush_every(batch_period(req), move || flush.logged.flush()));
    let window = Arc::new(Semaphore::new(max_inflight as usize));
    *run.scheduled.lock().unwrap() = Some(tokio::spawn(run.clone().schedule(rate, started, window)));
    Ok(json!({"started_ns": started}))
}

impl KvRun {
    /// Operation i at its intended time (open loop: at most max_inflight outstanding, the rest logged as Overflow
    /// puts) or one after the other (closed loop), as nats-py's KvUser; returns once every operation is logged.
    async fn schedule(self: Arc<Self>, rate: f64, started: i64, window: Arc<Semaphore>) {
        let mut inflight = tokio::task::JoinSet::new();
        if rate <= 0.0 {
            let mut index = 0;
            while wall_ns() < self.logged.stop_at() {
                self.one(index, wall_ns()).await;
                index += 1;
            }
            return;
        }
        let mut stopping = self.stopping.subscribe();
        let mut schedule = OpenLoop::new(started, rate);
        let mut now = wall_ns();
        loop {
            match schedule.next(now, self.logged.stop_at()) {
                Due::Now(index, intended) => match window.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let run = self.clone();
                        inflight.spawn(async move {
                            run.one(index, intended).await;
                            drop(permit);
                        });
                    }
                    Err(_) => {
                        let key = index / 2 % self.keys.len() as i64;
                        self.record(KV_PUT, key, intended, now, now, 0, OVERFLOW);
                    }
                },
                Due::At(next) => {
                    until_due(next, &mut stopping).await;
                    now = wall_ns();
                }
                Due::Stop => break,
            }
        }
        while inflight.join_next().await.is_some() {}
    }

    /// Operation `index`: even ones put key index/2, odd ones get the key whose put was acknowledged last.
    async fn one(&self, index: i64, intended: i64) {
        let mut op = KV_PUT;
        let mut key = index / 2 % self.keys.len() as i64;
        let last = self.last_put.load(Ordering::SeqCst);
        if index % 2 == 1 && last >= 0 {
            (op, key) = (KV_GET, last);
        }
        let name = &self.keys[key as usize];
        let sent = wall_ns();
        let result = if op == KV_PUT {
            match tokio::time::timeout(KV_OP_TIMEOUT, self.store.put(name, self.payload.clone())).await {
                Ok(Ok(revision)) => {
                    self.last_put.store(key, Ordering::SeqCst);
                    Ok(revision as i64)
                }
                Ok(Err(e)) => Err(format!("async_nats::jetstream::kv::PutError({:?})", e.kind())),
                Err(_) => Err("Timeout".to_string()),
            }
        } else {
            match tokio::time::timeout(KV_OP_TIMEOUT, self.store.entry(name)).await {
                Ok(Ok(Some(entry))) => Ok(entry.revision as i64),
                Ok(Ok(None)) => Err("KeyNotFound".to_string()),
                Ok(Err(e)) => Err(format!("async_nats::jetstream::kv::EntryError({:?})", e.kind())),
                Err(_) => Err("Timeout".to_string()),
            }
        };
        match result {
            Ok(revision) => self.record(op, key, intended, sent, wall_ns(), revision, ""),
            Err(class) => self.record(op, key, intended, sent, wall_ns(), 0, &class),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn record(&self, op: i64, key: i64, intended: i64, sent: i64, done: i64, revision: i64, class: &str) {
        let mut log = self.logged.log.lock().unwrap();
        let error = log.count(class);
        log.rows
            .extend_from_slice(&[op, key, intended, sent, done, revision, error, 0]);
    }

    /// Ends the schedule at `at`; the operations in flight end within their own timeout and are logged.
    pub(super) async fn finish(self: Arc<Self>, at: i64) -> Value {
        self.logged.stop(at);
        self.stopping.send_replace(true);
        let scheduled = self.scheduled.lock().unwrap().take();
        if let Some(scheduled) = scheduled {
            let _ = scheduled.await;
        }
        let log = self.logged.last_flush();
        json!({"ops": log.ops, "ok": log.acked, "overflow": log.overflow, "failed": log.failed})
    }
}
