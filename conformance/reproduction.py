"""A generated program as a standalone nats-py script, so that a vendor can run an oracle's failure by hand.

The script creates its own stream, runs the program's steps printing each answer, prints what the stream then holds
(stream info, and every message by MSG.GET), and deletes the stream.
"""

from __future__ import annotations

from .programs import Delete, Operation, Publish, Purge

STREAM, ROOT = "JETCHECK_REPRO", "jetcheck_repro"

_HEAD = '''"""{title}

Run: python repro.py [nats://127.0.0.1:4222]  (creates stream {stream} on {root}.>, deletes it at the end)
"""

import asyncio
import json
import sys

import nats

STREAM, ROOT = {stream!r}, {root!r}
SUBJECTS = {subjects!r}


async def main(url):
    nc = await nats.connect(url)

    async def api(subject, body=None):
        reply = await nc.request(subject, b"" if body is None else json.dumps(body).encode(), timeout=5)
        return json.loads(reply.data)

    async def publish(subject, payload, headers):
        return json.loads((await nc.request(f"{{ROOT}}.{{subject}}", payload, headers=headers, timeout=5)).data)

    print("create:", await api(f"$JS.API.STREAM.CREATE.{{STREAM}}", {config}))
    try:
'''

_TAIL = """        state = (await api(f"$JS.API.STREAM.INFO.{STREAM}", {"subjects_filter": ">"}))["state"]
        print("state:", state)
        for seq in range(state["first_seq"], state["last_seq"] + 1):
            print("MSG.GET", seq, await api(f"$JS.API.STREAM.MSG.GET.{STREAM}", {"seq": seq}))
        for subject in SUBJECTS:
            last = await api(f"$JS.API.STREAM.MSG.GET.{STREAM}", {"last_by_subj": f"{ROOT}.{subject}"})
            print("MSG.GET last_by_subj", subject, last)
    finally:
        await api(f"$JS.API.STREAM.DELETE.{STREAM}")
        await nc.close()


asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "nats://127.0.0.1:4222"))
"""


def _step(op: Operation) -> str:
    if isinstance(op, Publish):
        return f"await publish({op.subject!r}, {op.payload!r}, {op.header_map(STREAM) or None!r})"
    if isinstance(op, Purge):
        return f'await api(f"$JS.API.STREAM.PURGE.{{STREAM}}", {op.request(ROOT) or None!r})'
    assert isinstance(op, Delete)
    return f'await api(f"$JS.API.STREAM.MSG.DELETE.{{STREAM}}", {{"seq": {op.seq}}})'


def script(title: str, config: dict, program: list[Operation]) -> str:
    """The program as a script on a stream of `config` (beside its name and subjects)."""
    body = {"name": STREAM, "subjects": [f"{ROOT}.>"], **config}
    subjects = sorted({op.subject for op in program if isinstance(op, Publish)})
    head = _HEAD.format(title=title, stream=STREAM, root=ROOT, subjects=subjects, config=repr(body))
    steps = "".join(f"        print({i}, {str(op)!r}, {_step(op)})\n" for i, op in enumerate(program, 1))
    return head + steps + _TAIL
