//! Continuous consumption (ordered, push, consume), one-shot fetch, stop, and the events and misbehaviours of
//! consumption (PROTOCOL.md "Ops (v1)").

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_nats::jetstream::consumer::{pull, push, AckPolicy, DeliverPolicy};
use async_nats::jetstream::Message;
use futures::StreamExt;
use serde_json::{json, Value};
use tokio::task::AbortHandle;

use crate::out::{boxed, describe};
use crate::session::{Session, API_TIMEOUT};
use crate::{b64, f64_arg, i64_arg, mono_ns, seconds, str_arg, Driver, Fail, OpResult};

const CHATTY_INTERVAL: Duration = Duration::from_millis(100);
/// What the client's ordered pull consumer and Consumer::messages() put in their pull requests when nothing caps
/// them (async-nats src/jetstream/consumer/pull.rs DEFAULT_IDLE_HEARTBEAT); only the fallback when the driver
/// cannot see the pull request itself.
const DEFAULT_IDLE_HEARTBEAT_S: f64 = 15.0;

/// The kinds of the errors the client's consumer message streams yield (`async_nats::error::Error<Kind>`): the
/// error type's name that events give, and the kind that is a missed heartbeat.
trait StreamErrorKind: Clone + std::fmt::Debug + std::fmt::Display + PartialEq + Send + Sync + 'static {
    const ERROR_TYPE: &'static str;
    const MISSING_HEARTBEAT: Self;
}

impl StreamErrorKind for pull::OrderedErrorKind {
    const ERROR_TYPE: &'static str = "OrderedError";
    const MISSING_HEARTBEAT: Self = Self::MissingHeartbeat;
}

impl StreamErrorKind for push::MessagesErrorKind {
    const ERROR_TYPE: &'static str = "push::MessagesError";
    const MISSING_HEARTBEAT: Self = Self::MissingHeartbeat;
}

impl StreamErrorKind for pull::MessagesErrorKind {
    const ERROR_TYPE: &'static str = "pull::MessagesError";
    const MISSING_HEARTBEAT: Self = Self::MissingHeartbeat;
}

#[derive(Default)]
struct SubState {
    stopped: bool,
    consumer: String,
    reset: bool,
    running: bool,
    task: Option<AbortHandle>,
    stop_watch: Option<Box<dyn FnOnce() + Send>>,
}

/// One continuous consumption or watch, and its bookkeeping.
pub struct Subscription {
    pub d: Arc<Driver>,
    pub id: String,
    pub session: String,
    ordered: bool,
    state: Mutex<SubState>,
}

impl Subscription {
    /// Registers sub `id` of session `session`, refused when that sub exists.
    pub fn register(d: &Arc<Driver>, session: &str, id: &str, ordered: bool) -> Result<Arc<Subscription>, Fail> {
        if id.is_empty() {
            return Err(Fail::new("invalid", "a sub id is needed"));
        }
        let sub = Arc::new(Subscription {
            d: d.clone(),
            id: id.to_string(),
            session: session.to_string(),
            ordered,
            state: Mutex::default(),
        });
        let mut subs = d.subs.lock().unwrap();
        if subs.contains_key(id) {
            return Err(Fail::new("invalid", format!("sub {id:?} exists")));
        }
        subs.insert(id.to_string(), sub.clone());
        Ok(sub)
    }

    /// `setup` within API_TIMEOUT (`what` names it in the timeout's message); a failure forgets the sub again.
    pub async fn set_up<T>(
        &self,
        what: &str,
        setup: impl std::future::Future<Output = Result<T, Fail>>,
    ) -> Result<T, Fail> {
        let result = match tokio::time::timeout(API_TIMEOUT, setup).await {
            Ok(result) => result,
            Err(_) => Err(Fail::new("timeout", format!("{what} took too long"))),
        };
        if result.is_err() {
            self.forget();
        }
        result
    }

    pub fn forget(&self) {
        let mut subs = self.d.subs.lock().unwrap();
        if subs.get(&self.id).is_some_and(|s| std::ptr::eq(Arc::as_ptr(s), self)) {
            subs.remove(&self.id);
        }
    }

    /// Ends the consumption: after it returns nothing more is streamed for this sub.
    pub fn stop(&self) {
        let (task, stop_watch) = {
            let mut st = self.state.lock().unwrap();
            st.stopped = true;
            st.running = false;
            (st.task.take(), st.stop_watch.take())
        };
        if let Some(task) = task {
            task.abort();
        }
        if let Some(stop_watch) = stop_watch {
            stop_watch();
        }
    }

    pub fn stopped(&self) -> bool {
        self.state.lock().unwrap().stopped
    }

    /// The task that runs the consumption (or watch): stop aborts it, which drops the client's stream and so its
    /// subscription.
    pub fn started(&self, task: AbortHandle, consumption: bool) {
        let mut st = self.state.lock().unwrap();
        if st.stopped {
            task.abort();
            return;
        }
        // only consumptions are running ones (chatty-missed-heartbeat talks about them), not watches
        st.running = consumption;
        st.task = Some(task);
    }

    pub fn on_stop(&self, f: Box<dyn FnOnce() + Send>) {
        let mut st = self.state.lock().unwrap();
        if st.stopped {
            drop(st);
            f();
            return;
        }
        st.stop_watch = Some(f);
    }

    fn running(&self) -> bool {
        let st = self.state.lock().unwrap();
        st.running && !st.stopped
    }

    fn set_consumer(&self, name: &str) {
        self.state.lock().unwrap().consumer = name.to_string();
    }

    /// Streams `record` (a watch record) unless the sub is stopped; `f` decides under the sub's lock.
    pub fn write_locked(&self, f: impl FnOnce() -> Option<Value>) {
        let st = self.state.lock().unwrap();
        if st.stopped {
            return;
        }
        if let Some(record) = f() {
            self.d.out.write(&record);
        }
    }

    fn deliver(&self, msg: &Message) {
        let mut record = match delivery_record(msg) {
            Ok(r) => r,
            Err(e) => {
                self.d.event(
                    &self.session,
                    &self.id,
                    "error",
                    &format!("delivery without JetStream metadata: {e}"),
                );
                return;
            }
        };
        let mut st = self.state.lock().unwrap();
        if st.stopped {
            return;
        }
        let name = record["consumer"].as_str().unwrap_or("").to_string();
        if !name.is_empty() && name != st.consumer {
            let previous = std::mem::replace(&mut st.consumer, name.clone());
            // async-nats has no reset notification: a recreated ordered consumer shows only as a new name
            // (<name>_<serial>, src/jetstream/consumer/pull.rs Ordered::poll_next).
            if !previous.is_empty() && self.ordered {
                st.reset = true;
                self.d.write_event(
                    &self.session,
                    &self.id,
                    "reset",
                    &format!("ordered consumer recreated: {name} replaced {previous}"),
                );
            }
        }
        if st.reset && self.d.mode("drop-deliveries-after-reset") {
            return;
        }
        record["type"] = json!("delivery");
        record["sub"] = json!(self.id);
        self.d.out.write(&record);
        if self.d.mode("duplicate-delivery") {
            self.d.out.write(&record);
        }
    }

    /// An error the client's message stream yielded, named by its type `error_type` (its kind type is that with
    /// `Kind`): a missed heartbeat (`missed_heartbeat`), else an error event. True when consumption ended for it.
    fn stream_error(&self, error_type: &str, missed_heartbeat: bool, e: &(dyn std::error::Error + 'static)) -> bool {
        if missed_heartbeat {
            return self.missed_heartbeat(&format!("{error_type}Kind::MissingHeartbeat: {}", describe(e)));
        }
        self.d.event(
            &self.session,
            &self.id,
            "error",
            &format!("{error_type}: {}", describe(e)),
        );
        false
    }

    /// A missed heartbeat the client reported: an event, and under terminal-on-missed-heartbeat the end.
    fn missed_heartbeat(&self, detail: &str) -> bool {
        self.d.event(&self.session, &self.id, "missed-heartbeat", detail);
        if self.d.mode("terminal-on-missed-heartbeat") && self.running() {
            self.d.event(
                &self.session,
                &self.id,
                "terminal",
                "misbehave terminal-on-missed-heartbeat: consumption stopped",
            );
            self.stop();
            self.forget();
            return true;
        }
        false
    }

    /// Runs the consumption: every message the client's stream yields is delivered (and acked, with `acks`), every
    /// error reported as a `stream_error`, and a stream that ends by itself ends the sub (`ended` says which).
    fn consume_stream<K: StreamErrorKind>(
        self: &Arc<Self>,
        mut messages: impl futures::Stream<Item = Result<Message, async_nats::error::Error<K>>> + Send + Unpin + 'static,
        acks: bool,
        ended: &'static str,
    ) {
        let runner = self.clone();
        let task = tokio::spawn(async move {
            while let Some(item) = messages.next().await {
                match item {
                    Ok(msg) => {
                        runner.deliver(&msg);
                        if acks {
                            if let Err(e) = msg.ack().await {
                                eprintln!("async-nats driver: sub {}: ack failed: {e}", runner.id);
                            }
                        }
                    }
                    Err(e) => {
                        if runner.stream_error(K::ERROR_TYPE, e.kind() == K::MISSING_HEARTBEAT, &e) {
                            return;
                        }
                    }
                }
            }
            runner.ended(ended);
        });
        self.started(task.abort_handle(), true);
    }

    /// The client's stream ended by itself (not through stop/close): `terminal`.
    pub fn ended(&self, detail: &str) {
        if !self.stopped() {
            self.d.event(&self.session, &self.id, "terminal", detail);
            self.stop();
            self.forget();
        }
    }
}

pub fn delivery_record(msg: &Message) -> Result<Value, String> {
    let info = msg.info().map_err(|e| e.to_string())?;
    Ok(json!({
        "stream_seq": info.stream_sequence,
        "consumer_seq": info.consumer_sequence,
        "subject": msg.subject.as_str(),
        "payload_b64": b64(&msg.payload),
        "consumer": info.consumer,
        "at_ns": mono_ns(),
    }))
}

impl Driver {
    /// Streams what the client reported, unless a misbehaviour swallows it or the sub was stopped.
    pub fn event(&self, session: &str, sub: &str, kind: &str, detail: &str) {
        if kind == "missed-heartbeat" && self.mode("swallow-missed-heartbeat") {
            return;
        }
        if !sub.is_empty() {
            let found = self.subs.lock().unwrap().get(sub).cloned();
            if let Some(found) = found {
                let st = found.state.lock().unwrap();
                if st.stopped && kind != "terminal" {
                    return;
                }
                self.write_event(session, sub, kind, detail);
                return;
            }
        }
        self.write_event(session, sub, kind, detail);
    }

    pub fn write_event(&self, session: &str, sub: &str, kind: &str, detail: &str) {
        let sub = if sub.is_empty() { Value::Null } else { json!(sub) };
        self.out.write(&json!({
            "type": "event", "session": session, "sub": sub, "kind": kind, "detail": detail, "at_ns": mono_ns(),
        }));
    }
}

/// chatty-missed-heartbeat: a missed-heartbeat event every 100 ms for every running consumption.
pub async fn chatter(d: Arc<Driver>) {
    let mut tick = tokio::time::interval(CHATTY_INTERVAL);
    loop {
        tick.tick().await;
        let subs: Vec<_> = d.subs.lock().unwrap().values().cloned().collect();
        for s in subs {
            if s.running() {
                d.write_event(
                    &s.session,
                    &s.id,
                    "missed-heartbeat",
                    "misbehave chatty-missed-heartbeat: invented by the driver",
                );
            }
        }
    }
}

fn deliver_policy(req: &Value) -> Result<DeliverPolicy, Fail> {
    let Some(start) = req.get("start").filter(|s| !s.is_null()) else {
        return Ok(DeliverPolicy::All);
    };
    Ok(match str_arg(start, "deliver_policy") {
        "all" | "" => DeliverPolicy::All,
        "last_per_subject" => DeliverPolicy::LastPerSubject,
        "by_start_sequence" => DeliverPolicy::ByStartSequence {
            start_sequence: start.get("seq").and_then(Value::as_u64).unwrap_or(0),
        },
        "by_start_time" => {
            let text = str_arg(start, "time");
            let start_time = time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .map_err(|e| Fail::new("invalid", format!("start.time: {e}")))?;
            DeliverPolicy::ByStartTime { start_time }
        }
        other => return Err(Fail::new("invalid", format!("unknown deliver_policy {other:?}"))),
    })
}

async fn stream_of(s: &Session, name: &str) -> Result<async_nats::jetstream::stream::Stream, Fail> {
    Ok(tokio::time::timeout(API_TIMEOUT, s.js.get_stream(name))
        .await
        .map_err(|_| Fail::new("timeout", "get_stream took too long"))??)
}

// --- the effective heartbeat: what the client really asked for in its pull request ---------------------------

/// Listens (on the same connection, which sees its own publishes) to the stream's pull requests, to read the
/// idle_heartbeat the client puts in them.
struct PullRequestWatch {
    sub: Option<async_nats::Subscriber>,
}

impl PullRequestWatch {
    async fn start(s: &Session, stream: &str) -> Self {
        let prefix = if s.api_prefix.is_empty() {
            "$JS.API".to_string()
        } else {
            s.api_prefix.clone()
        };
        let sub = s
            .client
            .subscribe(format!("{prefix}.CONSUMER.MSG.NEXT.{stream}.>"))
            .await
            .ok();
        if sub.is_some() {
            let _ = s.client.flush().await;
        }
        PullRequestWatch { sub }
    }

    /// The first pull request's heartbeat (null: none); the fallback when none was seen within 500 ms.
    async fn effective(mut self, fallback: Option<f64>) -> Value {
        let Some(sub) = self.sub.as_mut() else {
            return json!(fallback);
        };
        let seen = tokio::time::timeout(Duration::from_millis(500), sub.next()).await;
        let _ = sub.unsubscribe().await;
        match seen {
            Ok(Some(msg)) => {
                let body: Value = serde_json::from_slice(&msg.payload).unwrap_or(Value::Null);
                match body.get("idle_heartbeat").and_then(Value::as_i64) {
                    Some(ns) if ns > 0 => json!(ns as f64 / 1e9),
                    _ => Value::Null,
                }
            }
            _ => {
                eprintln!("async-nats driver: no pull request seen: effective heartbeat from the client's default");
                json!(fallback)
            }
        }
    }
}

// --- ordered -------------------------------------------------------------------------------------------------

pub async fn ordered(d: &Arc<Driver>, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    if f64_arg(req, "inactive_threshold_s").is_some() {
        return Err(Fail::new(
            "unsupported",
            "async-nats pull::OrderedConfig has no inactive_threshold: its ordered consumer always asks for 30 s \
             (src/jetstream/consumer/pull.rs, From<OrderedConfig> for Config)",
        ));
    }
    let mut config = pull::OrderedConfig {
        filter_subject: str_arg(req, "subject").to_string(),
        deliver_policy: deliver_policy(req)?,
        ..Default::default()
    };
    let heartbeat = f64_arg(req, "idle_heartbeat_s");
    if let Some(hb) = heartbeat.filter(|hb| *hb > 0.0 && *hb < DEFAULT_IDLE_HEARTBEAT_S) {
        // The ordered consumer has no heartbeat option; it asks for min(15 s, expires / 2) with expires capped by
        // the consumer's max_expires (pull.rs ordered_batch_config): that cap is the only way to a shorter one.
        config.max_expires = seconds(2.0 * hb);
    }
    let sub = Subscription::register(d, &s.id, str_arg(req, "sub"), true)?;
    let setup = async {
        let stream = stream_of(&s, str_arg(req, "stream")).await?;
        let consumer = stream.create_consumer(config).await?;
        let name = consumer.cached_info().name.clone();
        let watch = PullRequestWatch::start(&s, str_arg(req, "stream")).await;
        let messages = consumer.messages().await?;
        Ok::<_, Fail>((name, watch, messages))
    };
    let (name, watch, messages) = sub.set_up("creating the ordered consumer", setup).await?;
    sub.set_consumer(&name);
    sub.consume_stream(
        messages,
        false,
        "the client's ordered consumer stream ended (Ordered yielded None)",
    );
    let effective = watch.effective(Some(DEFAULT_IDLE_HEARTBEAT_S)).await;
    Ok(json!({"effective_idle_heartbeat_s": effective}))
}

// --- push ----------------------------------------------------------------------------------------------------

pub async fn push(d: &Arc<Driver>, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    let durable = str_arg(req, "durable").to_string();
    let queue = str_arg(req, "queue").to_string();
    let sub = Subscription::register(d, &s.id, str_arg(req, "sub"), false)?;
    let setup = async {
        let stream = stream_of(&s, str_arg(req, "stream")).await?;
        if !durable.is_empty() {
            // An existing durable is bound as it is: a second member must not move its deliver subject.
            match stream.get_consumer::<push::Config>(&durable).await {
                Ok(consumer) => return Ok::<_, Fail>((consumer, false)),
                // not found (10014; the client's get_consumer words it "consumer not found"): created below
                Err(e) => {
                    let f = boxed(e);
                    if f.err_code != Some(10014) && !f.message.contains("not found") {
                        return Err(f);
                    }
                }
            }
        }
        let config = push::Config {
            deliver_subject: s.client.new_inbox(),
            durable_name: (!durable.is_empty()).then(|| durable.clone()),
            deliver_group: (!queue.is_empty()).then(|| queue.clone()),
            filter_subject: str_arg(req, "subject").to_string(),
            ack_policy: AckPolicy::None,
            idle_heartbeat: f64_arg(req, "idle_heartbeat_s").map(seconds).unwrap_or_default(),
            inactive_threshold: f64_arg(req, "inactive_threshold_s").map(seconds).unwrap_or_default(),
            ..Default::default()
        };
        Ok((stream.create_consumer(config).await?, true))
    };
    let (consumer, created) = sub.set_up("creating the push consumer", setup).await?;
    let info = consumer.cached_info().clone();
    let group = info.config.deliver_group.clone().unwrap_or_default();
    if !created && group != queue && !d.mode("bind-any-queue") {
        sub.forget();
        return Err(Fail::new(
            "unsupported",
            format!(
                "async-nats push::Consumer::messages() always joins the consumer's own deliver_group ({group:?}); \
                 the client has no API naming another queue ({queue:?}) (src/jetstream/consumer/push.rs)"
            ),
        ));
    }
    let messages = match consumer.messages().await {
        Ok(m) => m,
        Err(e) => {
            sub.forget();
            return Err(e.into());
        }
    };
    sub.set_consumer(&info.name);
    sub.consume_stream(
        messages,
        false,
        "the client's push consumer stream ended (Messages yielded None)",
    );
    // push::Messages watches the consumer's own idle_heartbeat (2 intervals); null: none
    let hb = info.config.idle_heartbeat;
    let heartbeat = if hb.is_zero() {
        Value::Null
    } else {
        json!(hb.as_secs_f64())
    };
    Ok(json!({"consumer": info.name, "effective_idle_heartbeat_s": heartbeat}))
}

// --- consume -------------------------------------------------------------------------------------------------

pub async fn consume(d: &Arc<Driver>, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    let name = str_arg(req, "consumer").to_string();
    let sub = Subscription::register(d, &s.id, str_arg(req, "sub"), false)?;
    let setup = async {
        let stream = stream_of(&s, str_arg(req, "stream")).await?;
        let consumer = stream.get_consumer::<pull::Config>(&name).await.map_err(boxed)?;
        let watch = PullRequestWatch::start(&s, str_arg(req, "stream")).await;
        let mut builder = consumer.stream();
        if let Some(hb) = f64_arg(req, "idle_heartbeat_s") {
            builder = builder.heartbeat(seconds(hb));
        }
        if let Some(e) = f64_arg(req, "expires_s") {
            builder = builder.expires(seconds(e));
        }
        if let Some(n) = i64_arg(req, "max_messages") {
            builder = builder.max_messages_per_batch(n.max(1) as usize);
        }
        Ok::<_, Fail>((watch, builder.messages().await?))
    };
    let (watch, messages) = sub.set_up("starting the consumption", setup).await?;
    sub.set_consumer(&name);
    sub.consume_stream(
        messages,
        true,
        "the client's pull consumer stream ended (Stream yielded None)",
    );
    // Consumer::stream() asks for no heartbeat unless given one (pull.rs StreamBuilder::messages: Duration::ZERO)
    let effective = watch.effective(f64_arg(req, "idle_heartbeat_s")).await;
    Ok(json!({"effective_idle_heartbeat_s": effective}))
}

// --- fetch ---------------------------------------------------------------------------------------------------

pub async fn fetch(d: &Arc<Driver>, req: &Value) -> OpResult {
    let s = d.session(str_arg(req, "session"))?;
    let (Some(batch), Some(expires)) = (i64_arg(req, "batch"), f64_arg(req, "expires_s")) else {
        return Err(Fail::new("invalid", "fetch needs batch and expires_s"));
    };
    let stream = stream_of(&s, str_arg(req, "stream")).await?;
    let consumer = stream
        .get_consumer::<pull::Config>(str_arg(req, "consumer"))
        .await
        .map_err(boxed)?;
    // Consumer::batch() is the pull that waits up to its expiry; Consumer::fetch() sends no_wait and ends at once
    // with what is there (pull.rs FetchBuilder::messages)
    let mut builder = consumer
        .batch()
        .max_messages(batch.max(1) as usize)
        .expires(seconds(expires));
    let heartbeat = f64_arg(req, "idle_heartbeat_s");
    if let Some(hb) = heartbeat {
        builder = builder.heartbeat(seconds(hb));
    }
    let began = std::time::Instant::now();
    let mut messages = builder.messages().await?;
    let mut deliveries = Vec::new();
    let mut received = 0;
    let mut ending = Value::Null;
    while let Some(item) = messages.next().await {
        match item {
            Ok(msg) => {
                received += 1;
                match delivery_record(&msg) {
                    Ok(record) => {
                        if d.mode("duplicate-delivery") {
                            deliveries.push(record.clone());
                        }
                        deliveries.push(record);
                    }
                    Err(e) => eprintln!("async-nats driver: fetch: a message without JetStream metadata: {e}"),
                }
                if let Err(e) = msg.ack().await {
                    eprintln!("async-nats driver: fetch: ack failed: {e}");
                }
            }
            Err(e) => {
                ending = json!({"kind": "error", "detail": describe(e.as_ref())});
                break;
            }
        }
    }
    if ending.is_null() && received < batch {
        // The client's Batch ends an expired fetch (a 408 status) with no error, and has no missed-heartbeat
        // error at all: it skips heartbeats (pull.rs Batch::poll_next).
        ending =
            json!({"kind": "timeout", "detail": format!("Batch ended (None) after {received} of {batch} messages")});
    }
    Ok(json!({
        "deliveries": deliveries, "error": ending, "took_s": began.elapsed().as_secs_f64(),
        "effective_idle_heartbeat_s": heartbeat,
    }))
}

pub async fn stop(d: &Arc<Driver>, id: &str) -> OpResult {
    let sub = d.subs.lock().unwrap().remove(id);
    let Some(sub) = sub else {
        return Err(Fail::new("invalid", format!("no sub {id:?}")));
    };
    sub.stop();
    Ok(json!({}))
}
