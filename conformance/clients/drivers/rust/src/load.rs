//! Load: an open- or closed-loop publisher for `jetcheck load --client async-nats` (PROTOCOL.md "Load").
//!
//! The schedule, the async publishes and the ack collection all run here; jetcheck only starts and stops a run and
//! receives every operation's times in batches (one record per batch_ms), so neither the pipe nor Python paces it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::out::wall_ns;
use crate::{b64, f64_arg, i64_arg, str_arg, unsupported_op, Driver, Fail, OpResult};

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

pub struct PublishRun {
    logged: Logged,
    stopping: watch::Sender<bool>,
    drained: watch::Sender<bool>,
    collected: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

pub enum Run {
    Publish(Arc<PublishRun>),
    Consume(Arc<ConsumeRun>),
    Kv(Arc<KvRun>),
}

struct Pending {
    intended: i64,
    sent: i64,
    future: PublishAckFuture,
    _permit: OwnedSemaphorePermit,
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

async fn load_publish(d: &Arc<Driver>, req: &Value) -> OpResult {
    let sub = str_arg(req, "sub").to_string();
    let subject = str_arg(req, "subject").to_string();
    let max_inflight = i64_arg(req, "max_inflight").unwrap_or(0);
    let rate = f64_arg(req, "rate").unwrap_or(0.0);
    let size = i64_arg(req, "payload_size").unwrap_or(0);
    if sub.is_empty() || subject.is_empty() || max_inflight < 1 || rate < 0.0 || size < 0 {
        return Err(Fail::new(
            "invalid",
            "load_publish needs sub, subject, max_inflight >= 1, rate >= 0, payload_size >= 0",
        ));
    }
    let s = d.session(str_arg(req, "session"))?;
    let js = s.js.clone();
    let stamp = req.get("stamp").and_then(Value::as_bool).unwrap_or(false);
    let payload = bytes::Bytes::from(vec![b'x'; size as usize]);
    let run = Arc::new(PublishRun {
        logged: Logged::new(d, &sub, false),
        stopping: watch::channel(false).0,
        drained: watch::channel(false).0,
        collected: Mutex::default(),
    });
    register(d, &sub, Run::Publish(run.clone()))?;
    let started = wall_ns();
    let window = Arc::new(Semaphore::new(max_inflight as usize));
    let (acks, pending) = mpsc::channel::<Pending>(max_inflight as usize + 1);
    *run.collected.lock().unwrap() = Some(tokio::spawn(run.clone().collect(pending)));
    let flush = run.clone();
    *run.logged.flusher.lock().unwrap() = Some(flush_every(batch_period(req), move || flush.logged.flush()));
    let schedule = run.clone();
    tokio::spawn(async move {
        let publish = Publisher {
            js,
            subject,
            payload,
            stamp,
            seq: 0,
        };
        schedule.schedule(publish, rate, started, window, acks).await;
    });
    Ok(json!({"started_ns": started}))
}

struct Publisher {
    js: async_nats::jetstream::Context,
    subject: String,
    payload: bytes::Bytes,
    stamp: bool,
    seq: i64,
}

impl Publisher {
    async fn send(&mut self) -> (i64, Result<PublishAckFuture, String>) {
        let sent = wall_ns();
        let mut message = PublishMessage::build().payload(self.payload.clone());
        if self.stamp {
            self.seq += 1;
            message = message
                .header("Jc-Ts", sent.to_string())
                .header("Jc-Seq", self.seq.to_string());
        }
        let result = self.js.send_publish(self.subject.clone(), message).await;
        (
            sent,
            result.map_err(|e| format!("async_nats::jetstream::context::PublishError({:?})", e.kind())),
        )
    }
}

/// An open loop's schedule: operation i is due at started + i/rate (ns), whether or not the ones before it are done.
struct OpenLoop {
    started: i64,
    interval: f64,
    index: i64,
}

/// What an open loop does next: operation `index` now, at its intended time (ns); wait until `At` (ns); or stop.
enum Due {
    Now(i64, i64),
    At(i64),
    Stop,
}

impl OpenLoop {
    fn new(started: i64, rate: f64) -> Self {
        OpenLoop {
            started,
            interval: 1e9 / rate,
            index: 0,
        }
    }

    /// The next step at wall time `now`: every operation intended by `now` in turn (the caller keeps `now` through a
    /// burst), then a wait for the next; nothing intended at or after `stop_at` (ns) is done.
    fn next(&mut self, now: i64, stop_at: i64) -> Due {
        let intended = self.started + (self.index as f64 * self.interval) as i64;
        if intended >= stop_at {
            return Due::Stop;
        }
        if intended > now {
            return Due::At(intended);
        }
        self.index += 1;
        Due::Now(self.index - 1, intended)
    }
}

/// Waits until the wall clock reaches `due` (ns) or the run is stopped. tokio's timer has a 1 ms resolution, so
/// it sleeps on it only to a millisecond before; the rest is a thread sleep (tens of µs late, not up to 1 ms) on a
/// worker the runtime hands its other tasks off from (block_in_place).
async fn until_due(due: i64, stopping: &mut watch::Receiver<bool>) {
    const COARSE: i64 = 1_000_000;
    let coarse = due - wall_ns() - COARSE;
    if coarse > 0 {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_nanos(coarse as u64)) => {}
            _ = stopping.wait_for(|s| *s) => return,
        }
    }
    let fine = due - wall_ns();
    if fine > 0 && !*stopping.borrow() {
        tokio::task::block_in_place(|| std::thread::sleep(Duration::from_nanos(fine as u64)));
    }
}

impl PublishRun {
    fn record(&self, intended: i64, sent: i64, acked: i64, seq: i64, class: &str, code: i64) {
        let mut log = self.logged.log.lock().unwrap();
        let error = log.count(class);
        log.rows.extend_from_slice(&[intended, sent, acked, seq, error, code]);
    }

    async fn schedule(
        self: Arc<Self>,
        mut publisher: Publisher,
        rate: f64,
        started: i64,
        window: Arc<Semaphore>,
        acks: mpsc::Sender<Pending>,
    ) {
        let mut stopping = self.stopping.subscribe();
        if rate <= 0.0 {
            loop {
                let permit = tokio::select! {
                    permit = window.clone().acquire_owned() => permit.expect("the window is never closed"),
                    _ = stopping.wait_for(|s| *s) => return,
                };
                let now = wall_ns();
                if now >= self.logged.stop_at() {
                    return;
                }
                self.publish(&mut publisher, now, permit, &acks).await;
            }
        }
        let mut schedule = OpenLoop::new(started, rate);
        let mut now = wall_ns();
        loop {
            match schedule.next(now, self.logged.stop_at()) {
                Due::Now(_, intended) => match window.clone().try_acquire_owned() {
                    Ok(permit) => self.publish(&mut publisher, intended, permit, &acks).await,
                    // max_inflight outstanding: this one is not sent, and says so
                    Err(_) => self.record(intended, now, now, 0, OVERFLOW, 0),
                },
                // stop_at set: what fell due before it is still sent (and logged), nothing after it
                Due::At(next) => {
                    until_due(next, &mut stopping).await;
                    now = wall_ns();
                }
                Due::Stop => return,
            }
        }
    }

    async fn publish(
        &self,
        publisher: &mut Publisher,
        intended: i64,
        permit: OwnedSemaphorePermit,
        acks: &mpsc::Sender<Pending>,
    ) {
        match publisher.send().await {
            (sent, Ok(future)) => {
                let _ = acks
                    .send(Pending {
                        intended,
                        sent,
                        future,
                        _permit: permit,
                    })
                    .await;
            }
            (sent, Err(class)) => self.record(intended, sent, wall_ns(), 0, &class, 0),
        }
    }

    /// Waits for each publish's ack in publish order (a stream acks in that order), logs it and frees its slot.
    async fn collect(self: Arc<Self>, mut pending: mpsc::Receiver<Pending>) {
        let mut drained = self.drained.subscribe();
        while let Some(p) = pending.recv().await {
            let given_up = *drained.borrow();
            if given_up {
                self.record(p.intended, p.sent, wall_ns(), 0, UNACKED, 0);
                continue;
            }
            tokio::select! {
                ack = p.future => match ack {
                    Ok(ack) => self.record(p.intended, p.sent, wall_ns(), ack.sequence as i64, "", 0),
                    Err(e) => {
                        let fail = Fail::from_client(&e);
                        let (class, code) = match fail.err_code {
                            Some(code) => ("async_nats::jetstream::Error".to_string(), code as i64),
                            None => (format!("async_nats::jetstream::context::PublishError({:?})", e.kind()), 0),
                        };
                        self.record(p.intended, p.sent, wall_ns(), 0, &class, code);
                    }
                },
                _ = drained.wait_for(|d| *d) => self.record(p.intended, p.sent, wall_ns(), 0, UNACKED, 0),
            }
        }
    }

    async fn finish(self: Arc<Self>, at: i64) -> Value {
        self.logged.stop(at);
        self.stopping.send_replace(true);
        let collected = self.collected.lock().unwrap().take();
        if let Some(mut collected) = collected {
            if tokio::time::timeout(DRAIN_TIMEOUT, &mut collected).await.is_err() {
                // the collector logs what is still outstanding as unacknowledged
                self.drained.send_replace(true);
                let _ = collected.await;
            }
        }
        let log = self.logged.last_flush();
        json!({"ops": log.ops, "acked": log.acked, "overflow": log.overflow, "failed": log.failed})
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

// --- consume: fetch + explicit ack on a durable pull consumer -------------------------------------------------

const CONSUME_MAX_WAIT: Duration = Duration::from_millis(500);
const OP_MESSAGE: i64 = 0;
const OP_FETCH: i64 = 1;
const NO_E2E: i64 = -1;

pub struct ConsumeRun {
    logged: Logged,
    fetching: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

async fn load_consume(d: &Arc<Driver>, req: &Value) -> OpResult {
    let sub = str_arg(req, "sub").to_string();
    let (stream, durable) = (str_arg(req, "stream"), str_arg(req, "durable"));
    let batch = i64_arg(req, "batch").unwrap_or(0);
    if sub.is_empty() || stream.is_empty() || durable.is_empty() || batch < 1 {
        return Err(Fail::new(
            "invalid",
            "load_consume needs sub, stream, durable, batch >= 1",
        ));
    }
    let s = d.session(str_arg(req, "session"))?;
    let consumer =
        s.js.get_stream(stream)
            .await?
            .get_consumer::<async_nats::jetstream::consumer::pull::Config>(durable)
            .await
            .map_err(crate::out::boxed)?;
    let run = Arc::new(ConsumeRun {
        logged: Logged::new(d, &sub, true),
        fetching: Mutex::default(),
    });
    register(d, &sub, Run::Consume(run.clone()))?;
    let started = wall_ns();
    let flush = run.clone();
    *run.logged.flusher.lock().unwrap() = Some(flush_every(batch_period(req), move || flush.logged.flush()));
    let client = s.client.clone();
    *run.fetching.lock().unwrap() = Some(tokio::spawn(run.clone().fetch_loop(consumer, client, batch as usize)));
    Ok(json!({"started_ns": started}))
}

impl ConsumeRun {
    /// Pulls up to `batch` messages at a time (Consumer::batch(), 500 ms expiry) until the stop, logging and
    /// acking each message as it arrives.
    async fn fetch_loop(
        self: Arc<Self>,
        consumer: async_nats::jetstream::consumer::Consumer<async_nats::jetstream::consumer::pull::Config>,
        client: async_nats::Client,
        batch: usize,
    ) {
        use futures::StreamExt;
        loop {
            let started = wall_ns();
            if started >= self.logged.stop_at() {
                break;
            }
            let mut messages = match consumer
                .batch()
                .max_messages(batch)
                .expires(CONSUME_MAX_WAIT)
                .messages()
                .await
            {
                Ok(m) => m,
                Err(e) => {
                    self.record_fetch(
                        started,
                        0,
                        &format!("async_nats::jetstream::consumer::pull::BatchError({:?})", e.kind()),
                    );
                    continue;
                }
            };
            let mut count = 0;
            let mut failure = String::new();
            while let Some(item) = messages.next().await {
                match item {
                    Ok(msg) => {
                        count += 1;
                        self.consumed(&msg, started, wall_ns()).await;
                    }
                    Err(e) => {
                        failure = format!("async_nats::Error: {e}");
                        break;
                    }
                }
            }
            // an empty pull that expired is not an operation
            if count > 0 || !failure.is_empty() {
                self.record_fetch(started, count, &failure);
            }
        }
        // acks are publishes: out to the server before load_stop answers
        let _ = client.flush().await;
    }

    async fn consumed(&self, msg: &async_nats::jetstream::Message, started: i64, received: i64) {
        let e2e = msg
            .headers
            .as_ref()
            .and_then(|h| h.get("Jc-Ts"))
            .and_then(|v| v.as_str().parse::<i64>().ok())
            .map(|sent| received - sent)
            .unwrap_or(NO_E2E);
        let (seq, delivered) = msg
            .info()
            .map(|i| (i.stream_sequence as i64, i.delivered))
            .unwrap_or((0, 0));
        let class = match msg.ack().await {
            Ok(()) => String::new(),
            Err(e) => format!("async_nats::Error: {e}"),
        };
        let mut log = self.logged.log.lock().unwrap();
        let subject = match log.subject_index.get(msg.subject.as_str()) {
            Some(i) => *i,
            None => {
                log.subjects.push(msg.subject.to_string());
                let i = log.subjects.len() as i64;
                log.subject_index.insert(msg.subject.to_string(), i);
                i
            }
        };
        log.ops += 1;
        if !class.is_empty() {
            log.failed += 1;
        }
        let error = log.error_no(&class);
        let size = msg.payload.len() as i64;
        log.rows.extend_from_slice(&[
            OP_MESSAGE, started, received, seq, delivered, e2e, subject, size, error, 0,
        ]);
    }

    fn record_fetch(&self, started: i64, count: i64, class: &str) {
        let ended = wall_ns();
        let mut log = self.logged.log.lock().unwrap();
        log.fetches += 1;
        if !class.is_empty() {
            log.failed += 1;
        }
        let error = log.error_no(class);
        log.rows
            .extend_from_slice(&[OP_FETCH, started, ended, 0, 0, NO_E2E, 0, count, error, 0]);
    }

    /// Lets the pull in progress end (its messages are still logged and acked), flushes the acks and the rows.
    async fn finish(self: Arc<Self>, at: i64) -> Value {
        self.logged.stop(at);
        let fetching = self.fetching.lock().unwrap().take();
        if let Some(fetching) = fetching {
            let _ = fetching.await;
        }
        let log = self.logged.last_flush();
        json!({"ops": log.ops, "fetches": log.fetches, "failed": log.failed})
    }
}

// --- kv: put then get of the same key, on a schedule ----------------------------------------------------------

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

async fn load_kv(d: &Arc<Driver>, req: &Value) -> OpResult {
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
    async fn finish(self: Arc<Self>, at: i64) -> Value {
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
