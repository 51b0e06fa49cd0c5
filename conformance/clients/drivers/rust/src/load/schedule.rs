//! The open loop's schedule, which publish and KV runs share: when each operation is due, and the wait for it.

use std::time::Duration;

use tokio::sync::watch;

use crate::out::wall_ns;

/// An open loop's schedule: operation i is due at started + i/rate (ns), whether or not the ones before it are done.
pub(super) struct OpenLoop {
    started: i64,
    interval: f64,
    index: i64,
}

/// What an open loop does next: operation `index` now, at its intended time (ns); wait until `At` (ns); or stop.
pub(super) enum Due {
    Now(i64, i64),
    At(i64),
    Stop,
}

impl OpenLoop {
    pub(super) fn new(started: i64, rate: f64) -> Self {
        OpenLoop {
            started,
            interval: 1e9 / rate,
            index: 0,
        }
    }

    /// The next step at wall time `now`: every operation intended by `now` in turn (the caller keeps `now` through a
    /// burst), then a wait for the next; nothing intended at or after `stop_at` (ns) is done.
    pub(super) fn next(&mut self, now: i64, stop_at: i64) -> Due {
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
pub(super) async fn until_due(due: i64, stopping: &mut watch::Receiver<bool>) {
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
