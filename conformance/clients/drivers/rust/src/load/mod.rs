//! Load: the runs of `jetcheck load --client async-nats` (PROTOCOL.md "Load"): publish, consume and KV, each in its
//! module; here what they share (the row log and its flushing, the registry of runs, load_stop).
//!
//! The schedule, the async publishes and the ack collection all run in this driver; jetcheck only starts and stops a run and
//! receives every operation's times in batches (one record per batch_ms), so neither the pipe nor Python paces it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::out::wall_ns;
use crate::{b64, f64_arg, i64_arg, str_arg, unsupported_op, Driver, Fail, OpResult};

mod consume;
mod kv;
mod publish;
mod schedule;

use consume::{load_consume, ConsumeRun};
use kv::{load_kv, KvRun};
use publish::{load_publish, PublishRun};

pub const OPS: &[&str] = &["load_publish", "load_consume", "load_kv", "load_stop"];

const DEFAULT_BATCH: Duration = Duration::from_millis(50);
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
const NEVER: i64 = 1 << 62;
const OVERFLOW: &str = "Overflow";
const UNACKED: &str = "Unacknowledged";

/// A run's rows (six int64s per operation) and error classes until the next flush, and its counts.
#[derive(Default)]
struct RowLog {
    rows: Vec<i64>,
    errors: Vec<String>,
    index: HashMap<String, i64>,
    ops: i64,
    acked: i64,
    overflow: i64,
    failed: i64,
    // consume runs: the subjects consumed so far (a row names one by its 1-based index) and the fetches
    subjects: Vec<String>,
    subject_index: HashMap<String, i64>,
    fetches: i64,
}

impl RowLog {
    /// Counts an operation that ended as `class` ("" done, OVERFLOW never sent, anything else failed); returns the
    /// class's number for its row.
    fn count(&mut self, class: &str) -> i64 {
        self.ops += 1;
        match class {
            "" => self.acked += 1,
            OVERFLOW => self.overflow += 1,
            _ => self.failed += 1,
        }
        self.error_no(class)
    }

    fn error_no(&mut self, class: &str) -> i64 {
        if class.is_empty() {
            return 0;
        }
        if let Some(i) = self.index.get(class) {
            return *i;
        }
        self.errors.push(class.to_string());
        let i = self.errors.len() as i64;
        self.index.insert(class.to_string(), i);
        i
    }
}

/// What every run keeps: where its records go, its row log, when it stops, and the task that flushes the log.
struct Logged {
    d: Arc<Driver>,
    sub: String,
    log: Mutex<RowLog>,
    stop_at: AtomicI64,
    flusher: Mutex<Option<tokio::task::JoinHandle<()>>>,
    with_subjects: bool, // consume runs name the subjects their rows count
}

impl Logged {
    fn new(d: &Arc<Driver>, sub: &str, with_subjects: bool) -> Self {
        Logged {
            d: d.clone(),
            sub: sub.to_string(),
            log: Mutex::default(),
            stop_at: AtomicI64::new(NEVER),
            flusher: Mutex::default(),
            with_subjects,
        }
    }

    fn stop_at(&self) -> i64 {
        self.stop_at.load(Ordering::SeqCst)
    }

    /// Writes the rows logged since the last flush as one load record (none without any).
    fn flush(&self) {
        let (rows, errors, subjects) = {
            let mut log = self.log.lock().unwrap();
            let subjects = self.with_subjects.then(|| log.subjects.clone());
            (std::mem::take(&mut log.rows), log.errors.clone(), subjects)
        };
        if rows.is_empty() {
            return;
        }
        let raw: Vec<u8> = rows.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut record = json!({"type": "load", "sub": self.sub, "rows_b64": b64(&raw), "errors": errors});
        if let Some(subjects) = subjects {
            record["subjects"] = json!(subjects);
        }
        self.d.out.write(&record);
    }

    /// Moves the stop to `at` where that is earlier.
    fn stop(&self, at: i64) {
        self.stop_at.fetch_min(at, Ordering::SeqCst);
    }

    /// Ends the flushing, writes what is left and hands over the log for the counts.
    fn last_flush(&self) -> std::sync::MutexGuard<'_, RowLog> {
        if let Some(flusher) = self.flusher.lock().unwrap().take() {
            flusher.abort();
        }
        self.flush();
        self.log.lock().unwrap()
    }
}

/// Registers the run `sub` names, refusing a sub that is already running.
fn register(d: &Driver, sub: &str, run: Run) -> Result<(), Fail> {
    let mut runs = d.load_runs.lock().unwrap();
    if runs.contains_key(sub) {
        return Err(Fail::new("invalid", format!("load sub {sub:?} exists")));
    }
    runs.insert(sub.to_string(), run);
    Ok(())
}

/// How often a run flushes its rows: the request's batch_ms, or DEFAULT_BATCH.
fn batch_period(req: &Value) -> Duration {
    f64_arg(req, "batch_ms")
        .filter(|ms| *ms > 0.0)
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .unwrap_or(DEFAULT_BATCH)
}

/// Calls `flush` every `every`, from one period after now until the task is aborted.
fn flush_every(every: Duration, flush: impl Fn() + Send + 'static) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            flush();
        }
    })
}

pub enum Run {
    Publish(Arc<PublishRun>),
    Consume(Arc<ConsumeRun>),
    Kv(Arc<KvRun>),
}

pub async fn handle(d: &Arc<Driver>, op: &str, req: &Value) -> OpResult {
    match op {
        "load_publish" => load_publish(d, req).await,
        "load_consume" => load_consume(d, req).await,
        "load_kv" => load_kv(d, req).await,
        "load_stop" => load_stop(d, req).await,
        _ => Err(unsupported_op(op)),
    }
}

async fn load_stop(d: &Arc<Driver>, req: &Value) -> OpResult {
    let sub = str_arg(req, "sub");
    let run = d.load_runs.lock().unwrap().remove(sub);
    let Some(run) = run else {
        return Err(Fail::new("invalid", format!("no load sub {sub:?}")));
    };
    let now = wall_ns();
    let at = i64_arg(req, "at_ns").filter(|at| *at < now).unwrap_or(now);
    Ok(match run {
        Run::Publish(run) => run.finish(at).await,
        Run::Consume(run) => run.finish(at).await,
        Run::Kv(run) => run.finish(at).await,
    })
}
