"""The raw JetStream API as checks use it: exact requests, exact replies, error codes kept."""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import nats.errors
from nats.aio.client import Client
from nats.aio.msg import Msg

from .model import StreamState
from .silence import answering

API_TIMEOUT_S = 5.0
REACHABLE_TIMEOUT_S = 5.0
PROBE_STREAM = "jetcheck-no-such-stream"  # named in a probe's Nats-Expected-Stream, so the probe is never stored
NS = 1_000_000_000


class ApiError(Exception):
    """A JetStream API error reply: {"error": {"code", "err_code", "description"}}."""

    def __init__(self, code: int, err_code: int, description: str) -> None:
        super().__init__(f"{code}/{err_code} {description}")
        self.code = code
        self.err_code = err_code
        self.description = description


async def api(nc: Client, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    reply = await nc.request(subject, payload, timeout=API_TIMEOUT_S)
    data = json.loads(reply.data)
    error = data.get("error")
    if error:
        raise ApiError(error.get("code", 0), error.get("err_code", 0), error.get("description", ""))
    return data


async def publish_raw(nc: Client, subject: str, payload: bytes = b"", headers: dict[str, str] | None = None) -> dict:
    """Publish as a request and return the PubAck (or error) JSON exactly as the server answered."""
    reply = await nc.request(subject, payload, timeout=API_TIMEOUT_S, headers=headers)
    return json.loads(reply.data)


async def create_stream(nc: Client, name: str, subjects: list[str], **config: Any) -> dict[str, Any]:
    """Create a stream, wait until publishes reach it, and return the configuration the server settled on."""
    body = {"name": name, "subjects": subjects, "storage": "file", **config}
    settled = (await api(nc, f"$JS.API.STREAM.CREATE.{name}", body))["config"]
    if clustered(nc) and subjects and not settled.get("no_ack"):  # a no_ack stream answers nothing, not a probe
        # the probe names a stream that does not exist: the stream answers 10060 and stores nothing
        probe = ".".join("jetcheck-probe" if token in ("*", ">") else token for token in subjects[0].split("."))
        reply = await wait_until_answered(nc, probe, b"", {"Nats-Expected-Stream": PROBE_STREAM})
        if "error" not in json.loads(reply.data):
            raise ApiError(
                0,
                0,
                f"stream {name} stored a probe that named stream {PROBE_STREAM} in Nats-Expected-"
                "Stream (publish.expected-stream is broken); the check cannot start from a clean stream",
            )
    return settled


def clustered(nc: Client) -> bool:
    """Whether the server `nc` is connected to is part of a cluster (its INFO, as Target.connect's client records
    it, names one)."""
    return bool(nc.server_info.get("cluster"))


async def wait_until_answered(
    nc: Client,
    subject: str,
    payload: bytes,
    headers: dict[str, str] | None = None,
    timeout: float = REACHABLE_TIMEOUT_S,
) -> Msg:
    """Wait until something on the JetStream side answers requests on `subject` (a probe that changes nothing).

    In a cluster a stream or consumer may live on another node, and its interest in its subjects reaches the
    client's node over routes after the create reply: a request before that gets no responders (Go's client retries
    publishes that do; nats-py does not). Route interest has no event to await, hence the short polls."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await nc.request(subject, payload, timeout=API_TIMEOUT_S, headers=headers)
        except nats.errors.NoRespondersError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.005)


async def stream_state(nc: Client, name: str) -> StreamState:
    data = await api(nc, f"$JS.API.STREAM.INFO.{name}", {"subjects_filter": ">"})
    state = data["state"]
    return StreamState(
        messages=state["messages"],
        first_seq=state["first_seq"],
        last_seq=state["last_seq"],
        subjects=dict(state.get("subjects") or {}),
    )


async def purge(nc: Client, name: str, **request: Any) -> dict[str, Any]:
    """Purge with exactly the given request fields (none: purge everything)."""
    return await api(nc, f"$JS.API.STREAM.PURGE.{name}", request or None)


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    subject: str
    payload: bytes
    msg_id: str | None


async def get_message(nc: Client, stream: str, seq: int) -> StoredMessage | None:
    try:
        data = await api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq})
    except ApiError as exc:
        if exc.err_code == 10037:  # no message found
            return None
        raise
    message = data["message"]
    headers = base64.b64decode(message.get("hdrs") or b"").decode()
    msg_id = next(
        (line.split(":", 1)[1].strip() for line in headers.split("\r\n") if line.lower().startswith("nats-msg-id:")),
        None,
    )
    return StoredMessage(message["seq"], message["subject"], base64.b64decode(message.get("data") or b""), msg_id)


async def stored_messages(nc: Client, stream: str) -> list[StoredMessage]:
    """Every message the stream holds, in sequence order."""
    state = await stream_state(nc, stream)
    if state.messages == 0:
        return []
    found = [await get_message(nc, stream, seq) for seq in range(state.first_seq, state.last_seq + 1)]
    return [m for m in found if m is not None]


def epoch_seconds(text: str) -> float:
    """An RFC 3339 UTC time as the server writes it (up to nanoseconds, `Z`), as seconds since the epoch."""
    head, _, fraction = text.rstrip("Z").partition(".")
    return datetime.fromisoformat(head).replace(tzinfo=UTC).timestamp() + float(f"0.{fraction or 0}")


def rfc3339(at: float, whole_seconds: bool = False) -> str:
    """`at` (seconds since the epoch) as RFC 3339 UTC, to the microsecond or to the whole second."""
    moment = datetime.fromtimestamp(at, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if whole_seconds else moment.isoformat().replace("+00:00", "Z")


async def eventually(condition: Callable[[], Awaitable[bool]], timeout: float, interval: float = 0.05) -> bool:
    """Poll `condition` until it holds or `timeout` passes; True when it held."""
    deadline = time.monotonic() + timeout
    while True:
        if await condition():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(interval)


async def held_within(condition: Callable[[], Awaitable[bool]], timeout: float, *parties: Client) -> bool:
    """`eventually`, for a check that judges a condition that never held: False only once `parties` have answered a
    ping after the wait (silence.answering), so that a silent server is never taken for the rule's answer."""
    if await eventually(condition, timeout):
        return True
    await answering(*parties)
    return False


# --- consumers and raw pull requests (consumers, pull areas) -----------------------------------------------------


async def create_consumer(nc: Client, stream: str, **config: Any) -> dict[str, Any]:
    """Create a consumer with exactly `config` (named by durable_name or name when given); its consumer info."""
    name = config.get("durable_name") or config.get("name")
    subject = f"$JS.API.CONSUMER.CREATE.{stream}" + (f".{name}" if name else "")
    info = await api(nc, subject, {"stream_name": stream, "config": config})
    if clustered(nc) and not info["config"].get("deliver_subject"):  # pull: wait until requests reach it
        # a request that is not JSON is answered 400 Bad Request, and nothing is delivered or left waiting
        await wait_until_answered(nc, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{info['name']}", b"{")
    return info


async def consumer_info(nc: Client, stream: str, consumer: str) -> dict[str, Any]:
    return await api(nc, f"$JS.API.CONSUMER.INFO.{stream}.{consumer}")


# how long a cluster may take to apply a consumer change that its meta leader answered before applying it
APPLIED_TIMEOUT_S = 2.0


async def consumer_info_showing(
    nc: Client,
    stream: str,
    consumer: str,
    shows: Callable[[dict[str, Any]], bool],
    timeout: float = APPLIED_TIMEOUT_S,
) -> dict[str, Any]:
    """Consumer info once `shows(info)` holds; the last info read if it did not within `timeout` (while the server
    still answers: held_within), for the caller to judge.

    In a cluster the meta leader answers CONSUMER.PAUSE as soon as it has proposed the change (nats-server
    server/jetstream_api.go jsConsumerPauseRequest); the consumer's leader, which answers consumer info and delivers,
    applies it once the meta group has: until then its info and its deliveries are as before the change. On a single
    server the change is applied before the answer, and the first read shows it."""
    last: dict[str, Any] = {}

    async def shown() -> bool:
        nonlocal last
        last = await consumer_info(nc, stream, consumer)
        return shows(last)

    await held_within(shown, timeout, nc)
    return last


# under the 5 s a server gives an ephemeral consumer created without a threshold: a threshold dropped on the way shows
THRESHOLD_SLACK_S = 2.0


async def removal_of_inactive(nc: Client, stream: str, consumer: str, threshold: float, inactive_since: float):
    """Wait, up to `threshold` + THRESHOLD_SLACK_S, for `consumer` to be gone (404/10014); (gone, the most seconds it
    can have been inactive: since `inactive_since`, a time.monotonic() taken before it could become inactive)."""

    async def gone() -> bool:
        try:
            await consumer_info(nc, stream, consumer)
        except ApiError as exc:
            assert (exc.code, exc.err_code) == (404, 10014), f"consumer info refused otherwise than 'not found': {exc}"
            return True
        return False

    removed = await eventually(gone, timeout=threshold + THRESHOLD_SLACK_S, interval=0.1)
    return removed, time.monotonic() - inactive_since


async def assert_removed_once_inactive(
    nc: Client,
    stream: str,
    consumer: str,
    threshold: float,
    inactive_since: float,
    observe: Callable[[str, object], None],
    removed_too_soon: Callable[[float], str],
) -> None:
    """The ephemeral `consumer` is removed after its inactive `threshold` (seconds), not before (removal_of_inactive);
    records removed_after_s, and says `removed_too_soon(the most seconds it can have been inactive)` otherwise."""
    removed, inactive_at_most = await removal_of_inactive(nc, stream, consumer, threshold, inactive_since)
    observe("removed_after_s", round(inactive_at_most, 3))
    assert removed, f"ephemeral consumer still there {inactive_at_most:.1f}s after a {threshold}s inactive_threshold"
    assert inactive_at_most >= threshold, removed_too_soon(inactive_at_most)


@dataclass(frozen=True)
class PullStatus:
    """A status message ending (or refusing) a pull request, read exactly as the server sent it."""

    code: str
    description: str
    headers: dict[str, str]


@dataclass
class PullReply:
    messages: list[Any]  # nats-py Msg deliveries, in arrival order
    status: PullStatus | None  # the status that ended the request, None when none came within the wait


def _status_of(msg: Any) -> PullStatus | None:
    # nats-py keys the description with an Enum member; normalise every key to its text.
    headers = {str(getattr(k, "value", k)): v for k, v in (msg.headers or {}).items()}
    code = headers.pop("Status", "")
    if not code or msg.data:
        return None
    return PullStatus(code, headers.pop("Description", ""), headers)


class RawPull:
    """One pull request sent to `$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>` from its own inbox."""

    def __init__(self, nc: Client, stream: str, consumer: str) -> None:
        self.nc = nc
        self.subject = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{consumer}"
        self.reply = PullReply([], None)
        self._sub: Any = None

    async def send(self, request: dict[str, Any] | bytes | None = None) -> RawPull:
        """Send the request: a dict as JSON, bytes as they are, None as an empty body (a request for one)."""
        body = json.dumps(request).encode() if isinstance(request, dict) else (request or b"")
        inbox = self.nc.new_inbox()
        self._sub = await self.nc.subscribe(inbox)
        await self.nc.publish(self.subject, body, reply=inbox)
        await self.nc.flush()
        return self

    async def collect(self, wait: float, messages: int | None = None) -> PullReply:
        """Read deliveries until a status arrives, `messages` deliveries arrived, or `wait` seconds pass."""
        deadline = time.monotonic() + wait
        while self.reply.status is None and (messages is None or len(self.reply.messages) < messages):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                msg = await self._sub.next_msg(timeout=left)
            except nats.errors.TimeoutError:  # nothing more within the wait, from a server that still answers
                await answering(self.nc)
                break
            status = _status_of(msg)
            if status is None:
                self.reply.messages.append(msg)
            else:
                self.reply.status = status
        return self.reply

    async def close(self) -> None:
        if self._sub is not None:
            await self._sub.unsubscribe()
            self._sub = None


async def pull(
    nc: Client,
    stream: str,
    consumer: str,
    request: dict[str, Any] | bytes | None = None,
    wait: float = 1.0,
    messages: int | None = None,
) -> PullReply:
    """Send one raw pull request and collect what it brings (see RawPull.collect)."""
    raw = await RawPull(nc, stream, consumer).send(request)
    try:
        return await raw.collect(wait, messages)
    finally:
        await raw.close()


def message_headers(message: dict) -> dict[str, str]:
    """The headers of a STREAM.MSG.GET reply's message, by name (its base64 `hdrs` block, after NATS/1.0)."""
    lines = base64.b64decode(message.get("hdrs") or b"").decode().split("\r\n")[1:]
    return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines if ":" in line)}


@dataclass(frozen=True)
class SubjectMessage:
    seq: int
    payload: bytes
    headers: dict[str, str]
    subject: str = ""
    time: str = ""


async def subject_messages(nc: Client, stream: str, subject: str) -> list[SubjectMessage]:
    """Every message `stream` holds on `subject` (wildcards allowed), in order, with its headers (raw MSG.GET)."""
    found: list[SubjectMessage] = []
    seq = 0
    while True:
        try:
            data = await api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq + 1, "next_by_subj": subject})
        except ApiError as exc:
            if exc.err_code == 10037:  # no message found
                return found
            raise
        message = data["message"]
        seq = message["seq"]
        headers = message_headers(message)
        payload = base64.b64decode(message.get("data") or b"")
        found.append(SubjectMessage(seq, payload, headers, message["subject"], message.get("time", "")))
