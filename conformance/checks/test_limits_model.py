"""Property-based, stateful: a stream with limits and a discard policy, compared with the model after every step."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from nats.js.errors import APIError

from jetcheck.conformance.jsapi import ApiError, api, create_stream, purge, stored_messages, stream_state
from jetcheck.conformance.model import Limits, PubAck, PurgeResult, Rejected, StreamModel, StreamState
from jetcheck.conformance.oracle_runs import run_machine
from jetcheck.conformance.programs import FILTERS, MAX_KEEP, MSG_IDS, SUBJECTS

# Steps per generated program: enough for limits to bite (max_msgs up to 6), few enough to keep a run short.
STEPS = 15
# Hypothesis must finish (and shrink) inside the check's time: a timeout inside an example reads as flakiness.
PROPERTY_TIMEOUT_S = 600

LIMITS = st.builds(
    Limits,
    max_msgs=st.sampled_from((-1, 1, 2, 4, 6)),
    max_msgs_per_subject=st.sampled_from((-1, 1, 2, 3)),
    discard=st.sampled_from(("old", "new")),
).flatmap(
    # discard_new_per_subject needs discard new and a per-subject limit (else the server refuses the stream).
    lambda limits: (
        st.just(limits)
        if limits.discard == "old" or limits.max_msgs_per_subject < 0
        else st.builds(replace, st.just(limits), discard_new_per_subject=st.booleans())
    )
)


def _comparable(state: StreamState) -> StreamState:
    """The first sequence of an empty stream is left unspecified by the documents."""
    return state if state.messages else replace(state, first_seq=-1)


def machine_for(runner: asyncio.Runner, nc, names, observe):
    """A state machine class bound to one connection; each run creates its own prefixed stream."""
    js = nc.jetstream()
    refusals: set[str] = set()

    class LimitsMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = StreamModel()
            self.name = ""
            self.root = ""
            self.steps: list[str] = []

        def _expect(self, expected, got, step: str) -> None:
            self.steps.append(step)
            assert got == expected, self._story(f"{step}: the rules give {expected}, the server gave {got}")

        def _story(self, what: str) -> str:
            steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.steps, 1))
            return f"stream limits {self.model.limits}\nsteps:\n{steps}\n{what}"

        @initialize(limits=LIMITS)
        def create(self, limits: Limits) -> None:
            self.model = StreamModel(limits=limits)
            self.name, self.root = names.stream("L"), names.subject("l")
            runner.run(create_stream(nc, self.name, [f"{self.root}.>"], **limits.config()))

        @rule(subject=st.sampled_from(SUBJECTS), msg_id=st.sampled_from((None, *MSG_IDS)))
        def publish(self, subject: str, msg_id: str | None) -> None:
            expected = self.model.publish(subject, b"p", msg_id)
            got = runner.run(self._publish(subject, msg_id))
            self._expect(expected, got, f"publish({subject!r}, msg_id={msg_id!r})")

        async def _publish(self, subject: str, msg_id: str | None) -> PubAck | Rejected:
            headers = {"Nats-Msg-Id": msg_id} if msg_id else None
            try:
                ack = await js.publish(f"{self.root}.{subject}", b"p", headers=headers)
            except APIError as exc:
                return Rejected(exc.err_code or 0, exc.description or "")
            return PubAck(ack.seq, bool(ack.duplicate))

        @rule(filter_=st.sampled_from((None, *FILTERS)), keep=st.sampled_from((None, *range(1, MAX_KEEP))))
        def purge(self, filter_: str | None, keep: int | None) -> None:
            expected = self.model.purge(filter_, None, keep)
            request = {k: v for k, v in (("filter", filter_ and f"{self.root}.{filter_}"), ("keep", keep)) if v}
            got = PurgeResult(purged=runner.run(purge(nc, self.name, **request))["purged"])
            self._expect(expected, got, f"purge(filter={filter_!r}, keep={keep!r})")

        @precondition(lambda self: self.model.last_seq > 0)
        @rule(data=st.data(), no_erase=st.booleans())
        def delete(self, data, no_erase: bool) -> None:
            seq = data.draw(st.integers(1, self.model.last_seq), label="seq")
            expected = self.model.delete(seq)
            got = runner.run(self._delete(seq, no_erase))
            self._expect(expected, got, f"delete(seq={seq}, no_erase={no_erase})")

        async def _delete(self, seq: int, no_erase: bool) -> bool:
            try:
                await api(nc, f"$JS.API.STREAM.MSG.DELETE.{self.name}", {"seq": seq, "no_erase": no_erase})
            except ApiError as exc:
                refusals.add(f"{exc.code}/{exc.err_code}")
                observe("delete_refusals", sorted(refusals))
                return False
            return True

        @invariant()
        def stream_matches_model(self) -> None:
            if not self.name:
                return
            server = runner.run(stream_state(nc, self.name))
            state = StreamState(
                server.messages,
                server.first_seq,
                server.last_seq,
                {s[len(self.root) + 1 :]: n for s, n in server.subjects.items()},
            )
            assert _comparable(state) == _comparable(self.model.state()), self._story(
                f"stream state: the rules give {self.model.state()}, the server has {state}"
            )
            stored = [
                (m.seq, m.subject[len(self.root) + 1 :], m.msg_id) for m in runner.run(stored_messages(nc, self.name))
            ]
            modelled = [(m.seq, m.subject, m.msg_id) for m in self.model.messages.values()]
            assert stored == modelled, self._story(f"messages: the rules give {modelled}, the server holds {stored}")

        def teardown(self) -> None:
            if self.name:
                runner.run(api(nc, f"$JS.API.STREAM.DELETE.{self.name}"))

    return LimitsMachine


@pytest.mark.rule("model.limits-discard-deletes")
@pytest.mark.timeout(PROPERTY_TIMEOUT_S)
def test_streams_with_limits_follow_the_model_after_every_step(target, names, hypothesis_settings, observe):
    """Publishes, purges and deletes under limits and discard policies match the model after every step."""
    machine_settings = settings(hypothesis_settings, stateful_step_count=STEPS)
    run_machine(target, lambda runner, nc: machine_for(runner, nc, names, observe), machine_settings)
