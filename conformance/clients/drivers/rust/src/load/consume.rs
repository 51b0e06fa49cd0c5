//! Consume: fetch + explicit ack on a durable pull consumer.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::out::wall_ns;
use crate::{i64_arg, str_arg, Driver, Fail, OpResult};

use super::{batch_period, flush_every, register, Logged, Run};

const CONSUME_MAX_WAIT: Duration = Duration::from_millis(500);
const OP_MESSAGE: i64 = 0;
const OP_FETCH: i64 = 1;
const NO_E2E: i64 = -1;

pub struct ConsumeRun {
    logged: Logged,
    fetching: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

pub(super) async fn load_consume(d: &Arc<Driver>, req: &Value) -> OpResult {
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
    pub(super) async fn finish(self: Arc<Self>, at: i64) -> Value {
        self.logged.stop(at);
        let fetching = self.fetching.lock().unwrap().take();
        if let Some(fetching) = fetching {
            let _ = fetching.await;
        }
        let log = self.logged.last_flush();
        json!({"ops": log.ops, "fetches": log.fetches, "failed": log.failed})
    }
}
