"""Oracles for streams over generated programs: publishes with any mix of JetStream's headers and headers that
only look like them, deletes and purges, on both storages. The model judges every answer; a refusal must leave the
stream as it was; every read path must tell what the stream holds."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from jetcheck.conformance.model import StreamModel, allows
from jetcheck.conformance.oracle_runs import PROPERTY_TIMEOUT_S, failure, fresh_stream
from jetcheck.conformance.programs import FILTERS, SETUPS, SUBJECTS, Delete, Setup, applied, header_programs
from jetcheck.conformance.read_paths import Reads, disagreements
from jetcheck.conformance.replay import Step, refusals_with_effects, replay
from jetcheck.versions import parse_version

STORAGES = pytest.mark.parametrize("storage", ["file", "memory"])
LONG = pytest.mark.timeout(PROPERTY_TIMEOUT_S)
BATCHED_READS = parse_version("2.11.0")  # ADR-31's batch and multi_last forms of DIRECT.GET
SETUP_AND_PROGRAM = SETUPS.flatmap(lambda setup: st.tuples(st.just(setup), header_programs(setup)))


def _config(setup: Setup, storage: str) -> dict:
    return {"storage": storage, "allow_direct": True, **setup.config()}


def _model_disagreements(setup: Setup, steps: list[Step]) -> tuple[list[str], StreamModel]:
    """Each step whose answer is not the one (or one of those) the model gives, and the model after the steps."""
    model = setup.model()
    found = []
    for i, step in enumerate(steps, 1):
        expected = applied(model, step.op)
        # a refused delete's code is not documented: only whether it was carried out
        answer = step.answer is True if isinstance(step.op, Delete) else step.answer
        if not allows(expected, answer):
            found.append(f"step {i}, {step.op}: the rules give {expected}, the server answered {answer}")
    return found, model


@pytest.mark.rule("oracle.model-headers")
@STORAGES
@LONG
def test_publishes_with_any_headers_get_the_answers_and_contents_the_model_gives(oracle, names, storage):
    """Programs of publishes with any mix of documented and lookalike headers, deletes and purges get the model's
    answers, and leave the messages the model holds."""

    async def example(nc, drawn) -> None:
        setup, program = drawn
        config = _config(setup, storage)
        async with fresh_stream(nc, names, config) as stream:
            steps = await replay(nc, stream.name, stream.root, program)
            found, model = _model_disagreements(setup, steps)
            if not found:  # the answers were the rules' (so every step ran): what the stream holds must be too
                walk = await Reads(nc, stream.name, False).walk(steps[-1].after.first_seq, steps[-1].after.last_seq)
                stored = [(r.seq, r.subject[len(stream.root) + 1 :], r.payload) for r in walk]
                held = [(m.seq, m.subject, m.payload) for m in model.messages.values()]
                if held != stored:
                    found = [f"after the program the rules give {held}, the stream holds {stored}"]
            assert not found, failure("the rules of JetStream's publish headers", config, program, found)

    oracle(SETUP_AND_PROGRAM, example)


@pytest.mark.rule("oracle.refusal-no-effect")
@STORAGES
@LONG
def test_a_refused_request_leaves_the_stream_as_it_was(oracle, names, storage):
    """A publish, delete or purge the server refuses changes nothing: stream info reads the same before and after."""

    async def example(nc, drawn) -> None:
        setup, program = drawn
        config = _config(setup, storage)
        async with fresh_stream(nc, names, config) as stream:
            found = refusals_with_effects(await replay(nc, stream.name, stream.root, program))
            assert not found, failure("a refused request has no other effect", config, program, found)

    oracle(SETUP_AND_PROGRAM, example)


@pytest.mark.rule("oracle.read-paths-agree")
@STORAGES
@LONG
def test_every_read_path_tells_what_the_stream_holds(oracle, names, server_info, storage):
    """After any program, MSG.GET, every DIRECT.GET form, consumers, stream info and num_pending agree with the
    stream's messages read one sequence at a time."""
    batches = parse_version(server_info.version) >= BATCHED_READS

    async def example(nc, drawn) -> None:
        setup, program = drawn
        config = _config(setup, storage)
        async with fresh_stream(nc, names, config) as stream:
            await replay(nc, stream.name, stream.root, program)
            _, found = await disagreements(Reads(nc, stream.name, batches), stream.root, SUBJECTS, FILTERS)
            assert not found, failure("every read path tells the same story", config, program, found)

    oracle(SETUP_AND_PROGRAM, example)
