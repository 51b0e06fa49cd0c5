"""Property-based: random programs of publishes and purges against the reference model of the documented rules."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import pytest
from hypothesis import given

from jetcheck.conformance.jsapi import ApiError, api, create_stream, purge, stored_messages, stream_state
from jetcheck.conformance.model import PubAck, PurgeResult, StreamModel, StreamState
from jetcheck.conformance.programs import Operation, Publish, programs, render

from .test_limits_model import PROPERTY_TIMEOUT_S


def _relative(root: str, subjects: dict[str, int]) -> dict[str, int]:
    return {subject[len(root) + 1 :]: count for subject, count in subjects.items()}


def _comparable(state: StreamState) -> StreamState:
    """ADR-10 fixes the first sequence of a stream that holds messages; an empty one's is left unspecified
    (purge.all checks the plain purge's first = last + 1 on its own)."""
    return state if state.messages else replace(state, first_seq=-1)


async def _run_program(nc, names, program: list[Operation]) -> None:
    js = nc.jetstream()
    name, root = names.stream("P"), names.subject("p")
    await create_stream(nc, name, [f"{root}.>"])
    model = StreamModel()
    try:
        for step, op in enumerate(program, 1):
            if isinstance(op, Publish):
                expected = model.publish(op.subject, op.payload, op.msg_id)
                headers = {"Nats-Msg-Id": op.msg_id} if op.msg_id else None
                ack = await js.publish(f"{root}.{op.subject}", op.payload, headers=headers)
                got: object = PubAck(ack.seq, bool(ack.duplicate))
            else:
                expected = model.purge(op.filter, op.seq, op.keep)
                try:
                    got = PurgeResult(purged=(await purge(nc, name, **op.request(root)))["purged"])
                except ApiError as exc:
                    got = PurgeResult(err_code=exc.err_code)
            assert got == expected, f"step {step}, {op}: the rules give {expected}, the server gave {got}"
        server = await stream_state(nc, name)
        state = StreamState(server.messages, server.first_seq, server.last_seq, _relative(root, server.subjects))
        assert _comparable(state) == _comparable(model.state()), (
            f"final state: the rules give {model.state()}, the server has {state}"
        )
        stored = [(m.seq, m.subject[len(root) + 1 :], m.payload, m.msg_id) for m in await stored_messages(nc, name)]
        modelled = [(m.seq, m.subject, m.payload, m.msg_id) for m in model.messages.values()]
        assert stored == modelled, f"stored messages: the rules give {modelled}, the server holds {stored}"
    except AssertionError as exc:
        raise AssertionError(f"program:\n{render(program)}\n{exc.args[0]}") from None
    finally:
        await api(nc, f"$JS.API.STREAM.DELETE.{name}")


@pytest.mark.rule("model.publish-purge")
@pytest.mark.timeout(PROPERTY_TIMEOUT_S)
def test_publish_and_purge_programs_match_the_reference_model(target, names, hypothesis_settings, observe):
    """Programs of publishes (with ids) and purges of every variant give the PubAcks and state the rules predict."""
    examples = 0
    with asyncio.Runner() as runner:
        nc = runner.run(target.connect())
        try:

            @hypothesis_settings
            @given(programs())
            def program_matches_model(program):
                nonlocal examples
                examples += 1
                runner.run(_run_program(nc, names, program))

            program_matches_model()
        finally:
            runner.run(nc.close())
            observe("measured_examples", examples)
