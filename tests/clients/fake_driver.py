"""A driver speaking drivers/PROTOCOL.md without any client library, so the Python adapter is tested without node/go.

It reaches no server. `push`/`ordered` stream 3 deliveries and then, for `push`, the events its `subject` names
(comma-separated kinds); `fetch` takes `expires_s` to answer (in a thread: requests are handled concurrently);
`crash` writes a line to stderr and exits 3; `connect` says which credential fields it received; `--start-delay S`
makes it start reading requests only after S seconds, `--protocol N` says it speaks protocol N. `kv_watch` streams
an entry, the end of initial data and another entry for its sub (and one for a sub nobody asked for); `obj_watch`
an info and the end of initial data; `kv_watch` of a key "unsupported.>" answers `unsupported`.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time

START = time.monotonic_ns()
OUT = threading.Lock()
MODES: list[str] = []  # misbehave modes asked for
PROTOCOL = 3


def mono_ns() -> int:
    return time.monotonic_ns() - START  # its own clock, deliberately not the suite's


def send(message: dict) -> None:
    with OUT:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def ok(request: dict, result: dict | None = None) -> None:
    send({"id": request["id"], "ok": True, "result": result or {}})


def stream(request: dict) -> None:
    sub, session = request["sub"], request["session"]
    for seq in (1, 2, 3):
        payload = base64.b64encode(b"m%d" % seq).decode()
        send({"type": "delivery", "sub": sub, "stream_seq": seq, "consumer_seq": seq, "subject": "s.x",
              "payload_b64": payload, "consumer": "C1", "at_ns": mono_ns()})  # fmt: skip
    if request["op"] == "push":
        for kind in filter(None, request.get("subject", "").split(",")):
            send({"type": "event", "session": session, "sub": sub, "kind": kind, "detail": f"fake {kind}",
                  "at_ns": mono_ns()})  # fmt: skip


def watch(request: dict) -> None:
    if request["op"] == "kv_watch":
        sub = request["sub"]
        entries = [{"bucket": request["bucket"], "key": key, "value_b64": base64.b64encode(value).decode(),
                    "revision": revision, "operation": op} for key, value, revision, op in
                   (("a", b"1", 1, "PUT"), ("b", b"", 2, "DEL"))]  # fmt: skip
        updates = [("entry", entries[0]), ("entry", None), ("entry", entries[1])]
        send({"type": "watch", "sub": "w-nobody", "entry": entries[0], "at_ns": mono_ns()})
    else:
        sub = request["obj"]["sub"]
        info = {"name": "o", "bucket": request["obj"]["bucket"], "size": 3, "deleted": False}
        updates = [("info", info), ("info", None)]
    for field, payload in updates:
        send({"type": "watch", "sub": sub, field: payload, "at_ns": mono_ns()})


def fetch(request: dict) -> None:
    time.sleep(request["expires_s"])
    raised = max(request["idle_heartbeat_s"], 0.5) if request.get("idle_heartbeat_s") else None
    ok(request, {"deliveries": [], "error": {"kind": "timeout", "detail": "fake: no messages"},
                 "took_s": request["expires_s"], "effective_idle_heartbeat_s": raised})  # fmt: skip


def handle(request: dict) -> None:
    op = request.get("op")
    if op == "hello":
        ops = ["hello", "connect", "push", "ordered", "fetch", "kv_watch", "obj_watch", "stop"]
        ok(request, {"protocol": PROTOCOL, "client": "fake", "version": "v9.9.9", "runtime": "python",
                     "mono_ns": mono_ns(), "ops": ops})  # fmt: skip
    elif op == "connect":
        ok(request, {"received": sorted(request.get("credentials", {})), "modes": MODES})
    elif op in ("push", "ordered"):
        ok(request, {"effective_idle_heartbeat_s": request.get("idle_heartbeat_s")})
        stream(request)
    elif op == "kv_watch" and request["keys"] == ["unsupported.>"]:
        send({"id": request["id"], "ok": False, "error": {"kind": "unsupported", "message": "fake: no ranges",
              "code": None, "err_code": None}})  # fmt: skip
    elif op in ("kv_watch", "obj_watch"):
        ok(request)
        watch(request)
    elif op == "fetch":
        threading.Thread(target=fetch, args=(request,), daemon=True).start()
    elif op == "misbehave":
        MODES.extend(request["modes"])
        ok(request)
    elif op in ("stop", "close", "kv_create", "obj_create"):
        ok(request)
    elif op == "pause_newer":  # an op the fake client's release lacks (later releases have it)
        said = "not in fake 0.1.0: Consumer.pause"
        error = {"kind": "not_in_release", "message": said, "code": None, "err_code": None}
        send({"id": request["id"], "ok": False, "error": error})
    elif op == "crash":
        sys.stderr.write("fake driver: boom\n")
        sys.stderr.flush()
        sys.exit(3)
    elif op == "shutdown":
        ok(request)
        sys.exit(0)
    else:
        send({"id": request["id"], "ok": False, "error": {"kind": "unsupported", "message": f"no op {op}",
              "code": None, "err_code": None}})  # fmt: skip


def main() -> None:
    # `--start-delay S`: start reading only after S seconds, as node does while its runtime starts
    global PROTOCOL
    if sys.argv[1:2] == ["--start-delay"]:
        time.sleep(float(sys.argv[2]))
    if sys.argv[1:2] == ["--protocol"]:
        PROTOCOL = int(sys.argv[2])
    for line in sys.stdin:
        handle(json.loads(line))


if __name__ == "__main__":
    main()
