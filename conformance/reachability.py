"""Whether the target still answers after a check that did not pass: a run whose target stopped answering ends."""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from .run_record import RunRecord

# how long a target that failed a check may take to answer again before the run stops
REACHABLE_BOUND_S = 3.0


def unreachable(url: str, bound_s: float = REACHABLE_BOUND_S) -> str:
    """Why no NATS server at `url` sends its INFO within `bound_s` (tried again until then), or "" if one does.

    A bare TCP exchange: no credentials are sent, and a server that accepts but hangs counts as not answering."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 4222
    where = f"{host}:{port}"
    deadline = time.monotonic() + bound_s
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.create_connection((host, port), timeout=max(left, 0.1)) as sock:
                greeting = b""
                while len(greeting) < 5 and (chunk := sock.recv(5 - len(greeting))):
                    greeting += chunk
                if greeting == b"INFO ":
                    return ""
                why = f"{where} accepted a connection but sent no INFO"
        except ConnectionRefusedError:
            why = f"connection refused at {where}"
        except TimeoutError:
            why = f"no answer from {where} within {bound_s:.0f} s"
        except OSError as exc:
            why = f"{exc.strerror or type(exc).__name__} at {where}"
        if time.monotonic() + 0.2 >= deadline:
            return why
        time.sleep(0.2)  # a bounded retry: the server may be restarting


def note_if_unreachable(run: RunRecord, rule_id: str) -> None:
    assert run.target is not None
    why = unreachable(run.target.url)
    if why:
        run.stopped_reason = f"the target stopped answering ({why}) after check {rule_id}"
