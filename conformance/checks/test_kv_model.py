"""Property-based, stateful: a Key-Value bucket driven through nats-py's KV API, every read path compared after every
step with the ADR-8 model (conformance/kv_model.py)."""

from __future__ import annotations

import asyncio
import re

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from nats.js.errors import APIError, KeyNotFoundError, KeyWrongLastSequenceError

from jetcheck.conformance.checks.kv_read_paths import (
    consumer_read,
    direct_last,
    last_by_subject,
    subject_counts,
)
from jetcheck.conformance.kv_model import PUT, BucketModel, Entry, Outcome, Written, WrongLastSequence
from jetcheck.conformance.oracle_runs import run_machine

from .test_limits_model import PROPERTY_TIMEOUT_S

# Keys with nested tokens (n.x and n.x.y are two keys: a watch of n.x must not see n.x.y, nor the other way round).
KEYS = ("a", "b", "n.x", "n.x.y")
VALUES = st.binary(max_size=4)  # an empty value is a value too: only KV-Operation makes a marker
STEPS = 12
# Each step reads the bucket through every path (some 20 requests and 6 consumers): a fifth of the profile's examples
# keeps the fast profile to a few seconds.
EXAMPLES_SHARE = 5
WRONG_LAST = re.compile(r"^wrong last sequence: (\d+)$")


def _refusal(error: APIError) -> Outcome | str:
    """A refused write as the model says it: nats-py raises KeyWrongLastSequenceError for 10071 (and 10164) and keeps
    only the description, whose 'wrong last sequence: N' is 10071's words; anything else is shown as it came."""
    found = WRONG_LAST.match(error.description or "")
    if isinstance(error, KeyWrongLastSequenceError) and found:
        return WrongLastSequence(int(found.group(1)))
    code, err_code = getattr(error, "code", None), getattr(error, "err_code", None)
    return f"refused: {type(error).__name__} {code}/{err_code} {error.description}"


def _shown(answer) -> str:
    if answer is None:
        return "not found"
    if isinstance(answer, list):
        return "[" + ", ".join(map(str, answer)) + "]"
    return str(answer)


def machine_for(runner: asyncio.Runner, nc, names, steps: list[int]):
    """A state machine class bound to one connection; each run creates its own prefixed bucket and counts its steps
    into `steps` (one count per example)."""
    js = nc.jetstream()

    class KvMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.model = BucketModel()
            self.bucket = ""
            self.kv = None
            self.steps: list[str] = []

        def _story(self, what: str) -> str:
            steps = "\n".join(f"  {i}. {s}" for i, s in enumerate(self.steps, 1))
            return f"bucket with history {self.model.history}\nprogram:\n{steps}\n{what}"

        def _write(self, step: str, expected: Outcome, call) -> None:
            self.steps.append(step)
            steps[-1] += 1
            got = runner.run(self._outcome(call))
            assert got == expected, self._story(f"{step}: ADR-8's model gives {expected}, the server gave {got}")

        async def _outcome(self, call) -> Outcome | str:
            try:
                revision = await call
            except APIError as error:
                return _refusal(error)
            return Written(revision if isinstance(revision, int) and not isinstance(revision, bool) else None)

        # direct=True: ADR-8 buckets always allow direct gets; nats-py 2.16.0 leaves allow_direct unset unless asked
        @initialize(history=st.integers(1, 5))
        def create_bucket(self, history: int) -> None:
            self.model = BucketModel(history=history)
            self.bucket = names.bucket()
            steps.append(0)
            self.kv = runner.run(js.create_key_value(bucket=self.bucket, history=history, direct=True))

        @rule(key=st.sampled_from(KEYS), value=VALUES)
        def put(self, key: str, value: bytes) -> None:
            self._write(f"put({key!r}, {value!r})", self.model.put(key, value), self.kv.put(key, value))

        @rule(key=st.sampled_from(KEYS), value=VALUES)
        def create(self, key: str, value: bytes) -> None:
            self._write(f"create({key!r}, {value!r})", self.model.create(key, value), self.kv.create(key, value))

        @rule(key=st.sampled_from(KEYS), value=VALUES, data=st.data())
        def update(self, key: str, value: bytes, data) -> None:
            latest = self.model.latest(key)
            current = latest.revision if latest else 0
            # the current revision, a stale or future one, 0 (no message), another key's
            choices = sorted({current, max(0, current - 1), 0, self.model.last_seq, self.model.last_seq + 1})
            last = data.draw(st.sampled_from(choices), label="last")
            expected = self.model.update(key, value, last)
            self._write(f"update({key!r}, {value!r}, last={last})", expected, self.kv.update(key, value, last=last))

        @rule(key=st.sampled_from(KEYS))
        def delete(self, key: str) -> None:
            self._write(f"delete({key!r})", self.model.delete(key), self.kv.delete(key))

        @rule(key=st.sampled_from(KEYS))
        def purge(self, key: str) -> None:
            self._write(f"purge({key!r})", self.model.purge(key), self.kv.purge(key))

        @invariant()
        def every_read_path_tells_the_models_story(self) -> None:
            if not self.bucket:
                return
            differences = runner.run(self._differences())
            assert not differences, self._story(
                "read paths that differ from ADR-8's model (path: the model's answer | the server's):\n"
                + "\n".join(f"  {path}: {want} | {got}" for path, (want, got) in differences.items())
            )

        async def _differences(self) -> dict[str, tuple[str, str]]:
            model, bucket = self.model, self.bucket
            answers: dict[str, tuple[object, object]] = {}
            gets = await asyncio.gather(*(self._get(key) for key in KEYS))
            lasts = await asyncio.gather(*(last_by_subject(nc, bucket, key) for key in KEYS))
            directs = await asyncio.gather(*(direct_last(nc, bucket, key) for key in KEYS))
            for key, got, last, direct in zip(KEYS, gets, lasts, directs, strict=True):
                answers[f"get({key!r})"] = (model.get(key), got)
                answers[f"MSG.GET last_by_subj {key}"] = (model.latest(key), last)
                answers[f"DIRECT.GET {key}"] = (model.latest(key), direct)
            watch = await consumer_read(nc, bucket, ">", "last_per_subject")
            answers["watch('>') initial data"] = (model.watch_initial(), watch.entries)
            answers["watch('>') ends its initial data (pending 0)"] = (True, watch.ended)
            listing = await consumer_read(nc, bucket, ">", "last_per_subject", headers_only=True)
            answers["keys()"] = (model.keys(), sorted(e.key for e in listing.entries if e.operation == PUT))
            for key in KEYS:
                history = await consumer_read(nc, bucket, key, "all")
                answers[f"history({key!r})"] = (model.key_history(key), history.entries)
            counts, messages, first, last_seq = await subject_counts(nc, bucket)
            answers["stream info subjects"] = (model.subject_counts(), counts)
            answers["stream info messages, last_seq"] = ((len(model.entries), model.last_seq), (messages, last_seq))
            if model.first_seq is not None:  # an empty stream's first sequence is left open
                answers["stream info first_seq"] = (model.first_seq, first)
            return {path: (_shown(want), _shown(got)) for path, (want, got) in answers.items() if want != got}

        async def _get(self, key: str) -> Entry | None:
            try:
                entry = await self.kv.get(key)
            except KeyNotFoundError:
                return None
            return Entry(key, entry.revision, PUT, entry.value or b"")

        def teardown(self) -> None:
            if self.bucket:
                runner.run(js.delete_key_value(self.bucket))

    return KvMachine


@pytest.mark.rule("kv.model-read-paths")
@pytest.mark.timeout(PROPERTY_TIMEOUT_S)
def test_every_read_path_of_a_bucket_follows_the_adr8_model_after_every_step(
    target, names, hypothesis_settings, observe
):
    """Puts, creates, updates, deletes and purges leave get, last-by-subject, direct get, watch, keys, history and
    stream info all telling the story of ADR-8's model, after every step."""
    examples = max(1, hypothesis_settings.max_examples // EXAMPLES_SHARE)
    steps: list[int] = []
    machine_settings = settings(hypothesis_settings, max_examples=examples, stateful_step_count=STEPS)
    try:
        run_machine(target, lambda runner, nc: machine_for(runner, nc, names, steps), machine_settings)
    finally:
        observe("measured_examples", len(steps))
        observe("measured_steps", sum(steps))
