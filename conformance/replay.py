"""Running a program of stream operations on a server: each step's answer in the model's shapes, and the stream's
state around it, so that the model, the read paths and other servers can be held to the same answers."""

from __future__ import annotations

import json
from dataclasses import dataclass

import nats.errors
from nats.aio.client import Client

from .jsapi import API_TIMEOUT_S, ApiError, api
from .model import PubAck, PurgeResult, Rejected
from .programs import Delete, Operation, Publish, Purge
from .read_paths import Summary, summary
from .silence import answering


@dataclass(frozen=True)
class NoReply:
    """A publish the server never answered, while it still answered a ping: the documents promise a PubAck or an
    error for every JetStream publish."""

    def __str__(self) -> str:
        return "no reply"


Answer = PubAck | Rejected | PurgeResult | bool | NoReply


@dataclass(frozen=True)
class Step:
    op: Operation
    answer: Answer
    before: Summary
    after: Summary

    @property
    def refused(self) -> bool:
        return isinstance(self.answer, Rejected) or (isinstance(self.answer, PurgeResult) and self.answer.err_code != 0)


async def answer_of(nc: Client, stream: str, root: str, op: Operation) -> Answer:
    """The server's answer to one operation: a PubAck or refusal, a purge's count or refusal, a delete's success
    (True) or refusal."""
    if isinstance(op, Publish):
        try:
            reply = await nc.request(
                f"{root}.{op.subject}", op.payload, timeout=API_TIMEOUT_S, headers=op.header_map(stream) or None
            )
        except nats.errors.TimeoutError:
            await answering(nc)  # the server itself is there: it left this publish unanswered
            return NoReply()
        data = json.loads(reply.data)
        if "error" in data:
            return Rejected(data["error"].get("err_code", 0), data["error"].get("description", ""))
        return PubAck(data["seq"], bool(data.get("duplicate")))
    try:
        if isinstance(op, Purge):
            return PurgeResult(purged=(await api(nc, f"$JS.API.STREAM.PURGE.{stream}", op.request(root)))["purged"])
        assert isinstance(op, Delete)
        await api(nc, f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": op.seq})
        return True
    except ApiError as error:
        return PurgeResult(err_code=error.err_code) if isinstance(op, Purge) else Rejected(error.err_code)


async def replay(nc: Client, stream: str, root: str, program: list[Operation]) -> list[Step]:
    """Run `program` on `stream` (bound to `<root>.>`), one step at a time, reading the stream's state after each; a
    publish left unanswered ends the run there (what follows would say nothing about the program)."""
    steps = []
    before = await summary(nc, stream)
    for op in program:
        answer = await answer_of(nc, stream, root, op)
        if isinstance(answer, NoReply):  # its stream may not answer an info either
            steps.append(Step(op, answer, before, before))
            break
        after = await summary(nc, stream)
        steps.append(Step(op, answer, before, after))
        before = after
    return steps


def refusals_with_effects(steps: list[Step]) -> list[str]:
    """The refused steps after which the stream was not as before (a refusal must have no other effect)."""
    return [
        f"step {i}, {step.op}: refused ({step.answer}), yet the stream went from {step.before} to {step.after}"
        for i, step in enumerate(steps, 1)
        if step.refused and step.before != step.after
    ]
