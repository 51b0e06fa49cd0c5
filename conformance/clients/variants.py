"""Client variants for the suite's own proofs: `--client nats-py+<variant>` (results name the variant).

- `never-reset`: the ordered consumer is a plain push consumer with the ordered settings that never recreates it
  (a client without ADR-17 gap and heartbeat handling).
- `adr37-heartbeats`: push consumption watched as ADR-37 asks: a missed-heartbeat warning once 2 intervals pass
  without any message, the timer reset by every message, heartbeat or not (a reference, so a check can pass).
- `chatty-heartbeats`: the same watch with the timer reset by heartbeats only, so it warns while data flows.
- `give-up-heartbeats`: missed heartbeats are terminal: once 2 intervals pass without any message, push and
  ordered consumption stop for good (where ADR-37 asks for a warning and ADR-17 for a reset).
"""

from __future__ import annotations

import asyncio
import contextlib
import json

from nats.js import api

from .base import MISSED_HEARTBEAT, TERMINAL, Documented, StartPolicy
from .natspy import NatsPyAdapter, NatsPySession, NatsPySubscription, delivery

NS = 1_000_000_000


class NeverResetSession(NatsPySession):
    async def ordered(
        self,
        stream: str,
        subject: str,
        *,
        idle_heartbeat: float | None = None,
        start: StartPolicy | None = None,
        inactive_threshold: float | None = None,
    ) -> NatsPySubscription:
        start = start or StartPolicy()
        config = api.ConsumerConfig(
            deliver_policy=api.DeliverPolicy(start.deliver_policy),
            opt_start_seq=start.seq,
            opt_start_time=start.time,
            ack_policy=api.AckPolicy.NONE,
            max_deliver=1,
            mem_storage=True,
            num_replicas=1,
            inactive_threshold=inactive_threshold,
        )
        return await self._subscribe(
            stream, subject, config=config, flow_control=True, idle_heartbeat=idle_heartbeat or 5.0
        )


class WatchedPush(NatsPySubscription):
    """A push consumer read off a core subscription, so every status message is seen, with a heartbeat timer."""

    def __init__(self, session: NatsPySession, interval: float, reset_on_data: bool) -> None:
        super().__init__(None)
        self.session = session
        self.interval = interval
        self.reset_on_data = reset_on_data
        self.last_activity = 0.0
        self.watch: asyncio.Task | None = None

    async def start(self, stream: str, subject: str) -> WatchedPush:
        nc = self.session.nc
        deliver = nc.new_inbox()
        self.sub = await nc.subscribe(deliver, cb=self.on_raw)
        config = {"deliver_subject": deliver, "ack_policy": "none", "filter_subject": subject,
                  "idle_heartbeat": int(self.interval * NS), "flow_control": True}  # fmt: skip
        reply = await nc.request(f"$JS.API.CONSUMER.CREATE.{stream}", json.dumps({"stream_name": stream,
                                 "config": config}).encode(), timeout=5)  # fmt: skip
        assert "error" not in json.loads(reply.data), reply.data
        self.last_activity = asyncio.get_running_loop().time()
        self.watch = asyncio.create_task(self.watch_heartbeats())
        return self

    async def on_raw(self, msg) -> None:
        status = (msg.headers or {}).get("Status")
        if status == "100" and msg.reply:  # flow control: answer it
            await self.session.nc.publish(msg.reply, b"")
        if status == "100" or self.reset_on_data:
            self.last_activity = asyncio.get_running_loop().time()
        if not status:
            await self.on_msg(msg)

    async def on_msg(self, msg) -> None:
        self.inbox.put(delivery(msg))

    async def watch_heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            due = self.last_activity + 2 * self.interval
            if loop.time() >= due:
                what = "heartbeat or message" if self.reset_on_data else "heartbeat"
                self.session.events.add(MISSED_HEARTBEAT, f"no {what} for {2 * self.interval}s")
                self.last_activity = loop.time()
                continue
            await asyncio.sleep(due - loop.time())  # the timer itself: wakes exactly when the warning is due

    async def stop(self) -> None:
        if self.watch is not None:
            self.watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.watch
        await super().stop()


class WatchedSession(NatsPySession):
    reset_on_data = True

    async def push(self, stream: str, subject: str, *, idle_heartbeat: float) -> NatsPySubscription:
        sub = await WatchedPush(self, idle_heartbeat, self.reset_on_data).start(stream, subject)
        self.subscriptions.append(sub)
        return sub


class ChattySession(WatchedSession):
    reset_on_data = False


class GiveUpPush(WatchedPush):
    """The ADR-37 watch, except that the first missed heartbeat ends consumption instead of warning.

    The subscription itself stays (so the server keeps sending heartbeats, as to any client that stopped reading);
    the application just gets nothing more.
    """

    gave_up = False

    async def on_msg(self, msg) -> None:
        if not self.gave_up:
            await super().on_msg(msg)

    async def watch_heartbeats(self) -> None:
        loop = asyncio.get_running_loop()
        while (due := self.last_activity + 2 * self.interval) > loop.time():
            await asyncio.sleep(due - loop.time())
        self.gave_up = True
        give_up(self.session, 2 * self.interval)


def give_up(session: NatsPySession, quiet_s: float) -> None:
    session.events.add(MISSED_HEARTBEAT, f"no heartbeat or message for {quiet_s}s")
    session.events.add(TERMINAL, f"consumption stopped after {quiet_s}s without a heartbeat")


class GiveUpSession(WatchedSession):
    async def push(self, stream: str, subject: str, *, idle_heartbeat: float) -> NatsPySubscription:
        sub = await GiveUpPush(self, idle_heartbeat, reset_on_data=True).start(stream, subject)
        self.subscriptions.append(sub)
        return sub

    async def ordered(self, stream: str, subject: str, **options) -> NatsPySubscription:
        """nats-py's ordered consumer, its gap handling intact, with its heartbeat watch made terminal."""
        holder = await super().ordered(stream, subject, **options)
        # nats-py keeps the watch in the subscription's private JetStream state: `_active` is set by every
        # message (heartbeats included) and `_hbtask` checks it every 2 intervals, resetting the consumer when unset.
        jsi = holder.sub._sub._jsi
        jsi._hbtask.cancel()
        jsi._hbtask = asyncio.create_task(self.stop_when_idle(holder, jsi))
        return holder

    async def stop_when_idle(self, holder: NatsPySubscription, jsi) -> None:
        while True:
            await asyncio.sleep(2 * jsi._hbi)
            if not jsi._active:
                give_up(self, 2 * jsi._hbi)
                await holder.stop()
                return
            jsi._active = False


class Variant:
    """nats-py with another session class; the name carries the variant so no result passes for nats-py's."""

    session_class: type[NatsPySession] = NatsPySession
    variant = ""
    documented_missed = ""

    def __init__(self, adapter: NatsPyAdapter) -> None:
        self.adapter = adapter
        self.name = f"{adapter.name}+{self.variant}"
        self.version = adapter.version
        self.documented = Documented(
            ordered_idle_heartbeat_s=adapter.documented.ordered_idle_heartbeat_s,
            missed_heartbeats=self.documented_missed or adapter.documented.missed_heartbeats,
            heartbeat_behaviour=adapter.documented.heartbeat_behaviour if not self.documented_missed else "",
        )

    async def connect(self, url, credentials, *, reconnect_wait: float = 0.1) -> NatsPySession:
        session = await self.adapter.connect(url, credentials, reconnect_wait=reconnect_wait)
        session.__class__ = self.session_class  # same state, the variant's behaviour
        return session


class NeverReset(Variant):
    session_class = NeverResetSession
    variant = "never-reset"


class Adr37Heartbeats(Variant):
    session_class = WatchedSession
    variant = "adr37-heartbeats"
    documented_missed = "a missed-heartbeat event after 2 intervals without any message"


class ChattyHeartbeats(Variant):
    session_class = ChattySession
    variant = "chatty-heartbeats"
    documented_missed = "a missed-heartbeat event after 2 intervals without a heartbeat"


class GiveUpHeartbeats(Variant):
    session_class = GiveUpSession
    variant = "give-up-heartbeats"
    documented_missed = "consumption ends once 2 intervals pass without any message"


VARIANTS = {v.variant: v for v in (NeverReset, Adr37Heartbeats, ChattyHeartbeats, GiveUpHeartbeats)}
