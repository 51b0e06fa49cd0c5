//! Publish: an open- or closed-loop schedule of async publishes and the collection of their acks.

use std::sync::{Arc, Mutex};

use async_nats::jetstream::context::PublishAckFuture;
use async_nats::jetstream::message::PublishMessage;
use serde_json::{json, Value};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};

use crate::out::wall_ns;
use crate::{f64_arg, i64_arg, str_arg, Driver, Fail, OpResult};

use super::schedule::{until_due, Due, OpenLoop};
use super::{batch_period, flush_every, register, Logged, Run, DRAIN_TIMEOUT, OVERFLOW, UNACKED};

pub struct PublishRun {
    logged: Logged,
    stopping: watch::Sender<bool>,
    drained: watch::Sender<bool>,
    collected: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

struct Pending {
    intended: i64,
    sent: i64,
    future: PublishAckFuture,
    _permit: OwnedSemaphorePermit,
}

pub(super) async fn load_publish(d: &Arc<Driver>, req: &Value) -> OpResult {
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

    pub(super) async fn finish(self: Arc<Self>, at: i64) -> Value {
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
