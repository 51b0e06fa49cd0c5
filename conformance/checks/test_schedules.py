"""Message schedules (ADR-51, nats-server 2.12 and 2.14): messages a stream publishes to itself, later or again."""

from __future__ import annotations

import math

import pytest

from jetcheck.conformance.checks.answers import refused
from jetcheck.conformance.documented_errors import DocumentedRefusal, assert_refused_as_documented, refusal_in
from jetcheck.conformance.jsapi import (
    api,
    epoch_seconds,
    eventually,
    publish_raw,
    rfc3339,
    stream_state,
    subject_messages,
)
from jetcheck.conformance.silence import answering

pytestmark = pytest.mark.asyncio

ADR51 = "ADR-51"
SCHEDULE, TARGET, SCHEDULER, NEXT = "Nats-Schedule", "Nats-Schedule-Target", "Nats-Scheduler", "Nats-Schedule-Next"
PAST = "@at 2009-11-10T23:00:00Z"
SLACK_S = 1.0  # how long after its time a schedule may take to fire
FIRE_S = 5.0
INVALID_PATTERN = DocumentedRefusal(400, 10189)
INVALID_TARGET = DocumentedRefusal(400, 10190)
TTL_DISABLED = DocumentedRefusal(400, 10166)  # the errors table's 'per-message TTL is disabled', as for Nats-TTL


async def _scheduling(make_stream, **config):
    return await make_stream(allow_msg_schedules=True, **config)


async def _stored_time(nc, stream: str, seq: int) -> float:
    """When the server stored message `seq` of `stream`, by the server's clock."""
    return epoch_seconds((await api(nc, f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": seq}))["message"]["time"])


async def _fired(nc, stream, subject: str, count: int = 1) -> list:
    """The messages on `subject` once `count` are there; fails, while the server answers, when they do not come."""
    found: list = []

    async def enough() -> bool:
        found[:] = await subject_messages(nc, stream.name, subject)
        return len(found) >= count

    if not await eventually(enough, timeout=FIRE_S):
        await answering(nc)
        pytest.fail(f"{ADR51}: the schedule publishes to its target; {len(found)} of {count} came in {FIRE_S} s")
    return found


def _rejected(ack: dict) -> bool:
    return "error" in ack and not ack.get("seq")


@pytest.mark.rule("schedules.at-past")
async def test_a_past_schedule_fires_at_once_and_goes(nc, make_stream):
    """An '@at' 2009 schedule with header X-App publishes its body to the target with Nats-Scheduler and
    Nats-Schedule-Next: purge, and the schedule message is removed."""
    stream = await _scheduling(make_stream)
    schedule, target = stream.subject("schedule"), stream.subject("target")
    ack = await publish_raw(nc, schedule, b"body", {SCHEDULE: PAST, TARGET: target, "X-App": "kept"})
    (fired,) = (await _fired(nc, stream, target))[:1]
    got = (fired.payload, {h: fired.headers.get(h) for h in ("X-App", SCHEDULER, NEXT)})
    assert got == (b"body", {"X-App": "kept", SCHEDULER: schedule, NEXT: "purge"}), (
        f"{ADR51}: a past schedule is sent at once with its body and headers, Nats-Scheduler and Nats-Schedule-Next: "
        f"purge; the target got {fired.payload!r} with {fired.headers}"
    )
    left = [m.seq for m in await subject_messages(nc, stream.name, schedule)]
    assert left == [], f"{ADR51}: 'Once published the held message is removed'; schedule {ack.get('seq')} left {left}"


@pytest.mark.rule("schedules.at-future")
async def test_a_future_schedule_fires_at_its_time(nc, make_stream, observe):
    """An '@at' 2-3 s ahead (by the server's clock) is stored on the target at that time, within a second after."""
    stream = await _scheduling(make_stream)
    probe = await publish_raw(nc, stream.subject("clock"), b"")
    at = math.ceil(await _stored_time(nc, stream.name, probe["seq"])) + 2  # whole seconds: RFC 3339 without fraction
    when = rfc3339(at, whole_seconds=True)
    target = stream.subject("target")
    await publish_raw(nc, stream.subject("schedule"), b"later", {SCHEDULE: f"@at {when}", TARGET: target})
    (fired,) = (await _fired(nc, stream, target))[:1]
    stored = await _stored_time(nc, stream.name, fired.seq)
    observe("fired_after_s", round(stored - at, 3))
    assert at <= stored <= at + SLACK_S, (
        f"{ADR51}: a schedule is published near its time ({when}), not before it; the target's message was stored "
        f"{stored - at:+.3f} s from it"
    )


@pytest.mark.rule("schedules.disabled-refused")
async def test_a_schedule_to_a_stream_without_schedules_is_rejected(nc, make_stream, observe):
    """A past '@at' schedule to a plain stream is rejected, and nothing is stored or published."""
    stream = await make_stream()
    ack = await publish_raw(nc, stream.subject("schedule"), b"", {SCHEDULE: PAST, TARGET: stream.subject("target")})
    observe("rejection", ack.get("error"))
    assert _rejected(ack), f"{ADR51}: schedules need allow_msg_schedules; the plain stream answered {ack}"
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR51}: the rejected schedule was stored"


@pytest.mark.rule("schedules.invalid-rejected")
async def test_an_invalid_schedule_is_rejected(nc, make_stream, observe):
    """A pattern '@sometimes' is rejected with 400/10189, no target and a target outside the stream with 400/10190,
    and Nats-Schedule-TTL without allow_msg_ttl with 400/10166."""
    stream = await _scheduling(make_stream)
    target = stream.subject("target")
    cases = {
        "pattern @sometimes": ({SCHEDULE: "@sometimes", TARGET: target}, INVALID_PATTERN),
        "no target": ({SCHEDULE: PAST}, INVALID_TARGET),
        "a target outside the stream": ({SCHEDULE: PAST, TARGET: f"{stream.root}x.elsewhere"}, INVALID_TARGET),
        "Nats-Schedule-TTL without allow_msg_ttl": ({SCHEDULE: PAST, TARGET: target, "Nats-Schedule-TTL": "5m"},
                                                    TTL_DISABLED),
    }  # fmt: skip
    acks = {what: await publish_raw(nc, stream.subject("schedule", str(n)), b"", headers)
            for n, (what, (headers, _)) in enumerate(cases.items())}  # fmt: skip
    observe("rejections", {what: ack.get("error") for what, ack in acks.items()})
    accepted = {what: ack for what, ack in acks.items() if not _rejected(ack)}
    assert not accepted, f"{ADR51}: an invalid schedule is rejected; accepted {accepted}"
    for what, (_, documented) in cases.items():
        assert_refused_as_documented(refusal_in(acks[what]), documented, f"{ADR51}: a schedule with {what}")
    assert (await stream_state(nc, stream.name)).messages == 0, f"{ADR51}: a rejected schedule was stored or fired"


@pytest.mark.rule("schedules.config")
async def test_schedules_config_rules(nc, make_stream, names):
    """Schedules on a mirror are refused, turning them off is refused, on is allowed; they bring rollups and level 2."""
    stream = await _scheduling(make_stream)
    got = (stream.config.get("allow_rollup_hdrs"), (stream.config.get("metadata") or {}).get("_nats.req.level"))
    assert got == (True, "2"), (
        f"{ADR51}: schedules implicitly enable AllowRollup and require API level 2; the stream has allow_rollup_hdrs, "
        f"_nats.req.level {got}"
    )
    name = names.stream()
    body = {"name": name, "mirror": {"name": stream.name}, "allow_msg_schedules": True, "storage": "file"}
    await refused(nc, f"$JS.API.STREAM.CREATE.{name}", body, "a mirror with allow_msg_schedules")
    off = {**stream.config, "allow_msg_schedules": False}
    await refused(nc, f"$JS.API.STREAM.UPDATE.{stream.name}", off, "turning allow_msg_schedules off")
    plain = await make_stream()
    on = await api(nc, f"$JS.API.STREAM.UPDATE.{plain.name}", {**plain.config, "allow_msg_schedules": True})
    assert on["config"].get("allow_msg_schedules") is True, (
        f"{ADR51}: 'This feature can be enabled on existing streams'; the update answered {on['config']}"
    )


@pytest.mark.rule("schedules.every")
async def test_an_every_second_schedule_repeats_and_a_shorter_one_is_rejected(nc, make_stream):
    """'@every 1s' puts 2 messages on its target within 2 s and more; '@every 500ms' is rejected."""
    stream = await _scheduling(make_stream)
    short = await publish_raw(nc, stream.subject("fast"), b"", {SCHEDULE: "@every 500ms", TARGET: stream.subject("t")})
    assert _rejected(short), f"{ADR51}: 'The minimum supported interval is 1s'; '@every 500ms' was answered {short}"
    target = stream.subject("target")
    await publish_raw(nc, stream.subject("schedule"), b"tick", {SCHEDULE: "@every 1s", TARGET: target})
    ticks = await _fired(nc, stream, target, 2)
    assert [m.payload for m in ticks[:2]] == [b"tick", b"tick"], f"{ADR51}: '@every 1s' repeats; the target got {ticks}"


@pytest.mark.rule("schedules.time-zone-cron-only")
async def test_a_time_zone_on_an_at_schedule_is_rejected(nc, make_stream, observe):
    """An '@at' schedule with Nats-Schedule-Time-Zone UTC is rejected."""
    stream = await _scheduling(make_stream)
    headers = {SCHEDULE: PAST, TARGET: stream.subject("target"), "Nats-Schedule-Time-Zone": "UTC"}
    ack = await publish_raw(nc, stream.subject("schedule"), b"", headers)
    observe("rejection", ack.get("error"))
    assert _rejected(ack), f"{ADR51}: the time zone header is only allowed on Cron schedules; '@at' was answered {ack}"


@pytest.mark.rule("schedules.scheduler-not-self")
async def test_a_scheduler_naming_its_own_subject_is_rejected_with_10212(nc, make_stream):
    """A message on `x` with Nats-Schedule-Next: purge and Nats-Scheduler: `x` is rejected with 400/10212."""
    stream = await _scheduling(make_stream)
    subject = stream.subject("x")
    ack = await publish_raw(nc, subject, b"", {NEXT: "purge", SCHEDULER: subject})
    error = ack.get("error") or {}
    assert (error.get("code"), error.get("err_code")) == (400, 10212), (
        f"{ADR51}: 'the server rejects such publishes with error code 10212'; it answered {ack}"
    )
