"""Property-based, stateful: a pull consumer's deliveries and info compared with the model after every step."""

from __future__ import annotations

import asyncio

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

from jetcheck.conformance.consumer_model import (
    ACK_POLICIES,
    DELIVER_POLICIES,
    ConsumerConfig,
    ConsumerModel,
    ConsumerState,
    Delivery,
)
from jetcheck.conformance.jsapi import (
    API_TIMEOUT_S,
    RawPull,
    api,
    consumer_info,
    create_consumer,
    create_stream,
    eventually,
)
from jetcheck.conformance.model import StreamModel
from jetcheck.conformance.oracle_runs import run_machine
from jetcheck.conformance.programs import SUBJECTS

from .test_limits_model import PROPERTY_TIMEOUT_S

# Steps per program: enough to deliver, nak, redeliver and exhaust max_deliver 3, few enough to keep a run short.
STEPS = 20
# A no_wait pull is answered at once; this only bounds the wait for a server that does not answer.
PULL_WAIT_S = 2.0
# A consumer counts a stored message once the stream signals it, which may come after the PubAck: after a publish,
# num_pending is read again until it has caught up (or this passes).
SIGNAL_SETTLE_S = 2.0
MAX_MESSAGES = 8
EMPTY_PULLS = 2
FILTERS = (("a",), ("c.*",), ("c.>",), (">",), ("a", "b"), ("a", "c.>"), ("b", "c.x"))  # filter_subjects: disjoint
ACKS = {"ack": b"+ACK", "nak": b"-NAK", "term": b"+TERM", "in_progress": b"+WPI"}


def machine_for(runner: asyncio.Runner, nc, names):
    """A state machine class bound to one connection; each run creates its own prefixed stream and consumer."""
    js = nc.jetstream()

    class ConsumerMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.stream = StreamModel()
            self.model = ConsumerModel(self.stream)
            self.name = self.root = self.consumer = ""
            self.replies: dict[int, str] = {}  # stream sequence -> ack subject of its latest delivery
            self.pulled = False
            self.last_at_create = 0
            self.empty_pulls = 0
            self.published = False  # the last step published: num_pending may still lag it
            self.steps: list[str] = []

        def _story(self, what: str) -> str:
            steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.steps, 1))
            known = "".join(f"\n{note}" for note in self._known_deviations())
            return f"consumer {self.model.config}\nsteps:\n{steps}\n{what}{known}"

        def _known_deviations(self) -> list[str]:
            """The releases that deviate in what this program does, where a fix is known (reproduced by hand:
            docs/servers/nats-server.md)."""
            config, notes = self.model.config, []
            if config.deliver_policy == "by_start_sequence" and (config.opt_start_seq or 0) > self.last_at_create + 1:
                notes.append(
                    "known: nats-server before 2.11.0 starts a by_start_sequence consumer whose opt_start_seq lies "
                    "beyond the stream's last message + 1 at that message + 1, below its start (nats-server#6253)"
                )
            if config.max_deliver == 1 and self.model.exhausted():
                notes.append(
                    "known: nats-server before 2.11.4 counts a message nak'ed at its only delivery (max_deliver 1) "
                    "as redelivered once a pull passed it (nats-server#6877)"
                )
            return notes

        @initialize(data=st.data())
        def create(self, data) -> None:
            """A stream with a few messages, then a consumer of a drawn configuration."""
            policy = data.draw(st.sampled_from(DELIVER_POLICIES), label="deliver_policy")
            ack_policy = data.draw(st.sampled_from(ACK_POLICIES), label="ack_policy")
            # last_per_subject needs a filter (400/10094 otherwise)
            filters = data.draw(st.sampled_from(FILTERS if policy == "last_per_subject" else ((), *FILTERS)))
            # without naks nothing is redelivered here, and naks are drawn for ack policy explicit only
            max_deliver = data.draw(st.sampled_from((2, -1, 1, 3))) if ack_policy == "explicit" else -1
            before = data.draw(st.lists(st.sampled_from(SUBJECTS), max_size=6), label="published before")
            start = data.draw(st.integers(1, len(before) + 2)) if policy == "by_start_sequence" else None
            self.name, self.root, self.consumer = names.stream("K"), names.subject("k"), names.consumer("K")
            runner.run(create_stream(nc, self.name, [f"{self.root}.>"]))
            for subject in before:
                self._publish(subject)
            config = ConsumerConfig(policy, ack_policy, filters, max_deliver, start)
            self.model = ConsumerModel(self.stream, config)
            self.last_at_create = self.stream.last_seq
            runner.run(create_consumer(nc, self.name, durable_name=self.consumer, **config.config(self.root)))
            self.steps.append(f"create consumer {config}")

        def _publish(self, subject: str) -> None:
            expected = self.stream.publish(subject, b"p").seq
            got = runner.run(js.publish(f"{self.root}.{subject}", b"p")).seq
            self.steps.append(f"publish({subject!r}) -> seq {got}")
            assert got == expected, self._story(f"publish: the rules give seq {expected}, the server gave {got}")

        # "last" and "last_per_subject" start from the stream as it is at the first pull or at create, which the
        # documents do not tell apart: nothing is published in between. A few messages keep the program on the consumer
        # (more only when nothing else can be done).
        @precondition(
            lambda self: (
                (self.pulled or self.model.config.deliver_policy not in ("last", "last_per_subject"))
                and (len(self.stream.messages) < MAX_MESSAGES or self._stuck())
            )
        )
        @rule(subject=st.sampled_from(SUBJECTS))
        def then_publish(self, subject: str) -> None:
            self._publish(subject)
            self.published = True

        # a pull with nothing to deliver is answered with a status alone: a few of those are enough
        @precondition(lambda self: self.model.available() > 0 or self.empty_pulls < EMPTY_PULLS)
        @rule(batch=st.sampled_from((4, 1, 2, 3)))
        def pull(self, batch: int) -> None:
            self.pulled = True
            self.empty_pulls += self.model.available() == 0
            expected = self.model.pull(batch)
            messages = runner.run(self._pull(batch))
            self.steps.append(f"pull(batch={batch}, no_wait) -> {[m.metadata.sequence.stream for m in messages]}")
            for msg in messages:
                meta = msg.metadata
                got = Delivery(meta.sequence.stream, msg.subject[len(self.root) + 1 :], meta.num_delivered,
                               meta.sequence.consumer)  # fmt: skip
                candidates = self.model.candidates()
                assert got.seq in candidates, self._story(
                    f"delivery: the rules give one of stream sequences {candidates}, the server delivered {got}"
                )
                want = self.model.deliver(got.seq)
                assert got == want, self._story(f"delivery: the rules give {want}, the server delivered {got}")
                self.replies[got.seq] = msg.reply
            assert len(messages) == expected, self._story(
                f"pull of {batch}: the rules give {expected} messages, the server delivered {len(messages)}"
            )

        async def _pull(self, batch: int) -> list:
            raw = await RawPull(nc, self.name, self.consumer).send({"batch": batch, "no_wait": True})
            try:
                return (await raw.collect(PULL_WAIT_S, messages=batch)).messages
            finally:
                await raw.close()

        def _stuck(self) -> bool:
            """Nothing to pull and nothing to acknowledge: only a publish moves the program on."""
            return self.model.available() == 0 and self.empty_pulls >= EMPTY_PULLS and not self._acknowledgements()

        def _acknowledgements(self) -> list[str]:
            """What the program can send now: ack, in-progress (and, for explicit, nak and term) on a pending message,
            another ack of an acknowledged one. What a nak or term does to ack policy all's floor (acknowledge
            everything below it, or not) is not documented."""
            policy = self.model.config.ack_policy
            kinds = []
            if policy == "explicit" and self.model.outstanding():
                kinds.append("nak")
            if policy != "none" and self.model.pending():
                kinds += ["ack", "in_progress", *(("term",) if policy == "explicit" else ())]
            if policy != "none" and self.model.acked():
                kinds.append("ack_again")
            return kinds

        @precondition(lambda self: self._acknowledgements())
        @rule(data=st.data())
        def respond(self, data) -> None:
            kind = data.draw(st.sampled_from(self._acknowledgements()), label="kind")
            seqs = {"ack_again": self.model.acked, "nak": self.model.outstanding}.get(kind, self.model.pending)()
            seq = data.draw(st.sampled_from(seqs), label="seq")
            kind = kind.removesuffix("_again")
            # with a reply subject the server answers once it processed the ack: the next step sees its effect
            runner.run(nc.request(self.replies[seq], ACKS[kind], timeout=API_TIMEOUT_S))
            getattr(self.model, kind)(seq)
            self.steps.append(f"{kind}(seq {seq})")

        @invariant()
        def info_matches_model(self) -> None:
            if not self.consumer:
                return
            expected = self.model.expected()
            state = runner.run(self._settled_state(expected))
            differences = expected.differences(state)
            assert not differences, self._story(
                f"consumer info: the rules give {expected}\nthe server has {state}\nwhere they differ: {differences}"
            )

        async def _settled_state(self, expected) -> ConsumerState:
            state = ConsumerState.of(await consumer_info(nc, self.name, self.consumer))
            if self.published:
                self.published = False

                async def caught_up() -> bool:
                    nonlocal state
                    state = ConsumerState.of(await consumer_info(nc, self.name, self.consumer))
                    return "num_pending" not in expected.differences(state)

                await eventually(caught_up, SIGNAL_SETTLE_S)
            return state

        def teardown(self) -> None:
            if self.name:
                runner.run(api(nc, f"$JS.API.STREAM.DELETE.{self.name}"))

    return ConsumerMachine


@pytest.mark.rule("model.consumer-acks-pending")
@pytest.mark.timeout(PROPERTY_TIMEOUT_S)
def test_pull_consumers_follow_the_model_after_every_step(target, names, hypothesis_settings):
    """Pulls, acks, naks, terms and in-progress acks give the deliveries and consumer info the model predicts."""
    machine_settings = settings(hypothesis_settings, stateful_step_count=STEPS)
    run_machine(target, lambda runner, nc: machine_for(runner, nc, names), machine_settings)
