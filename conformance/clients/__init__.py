"""Clients under test, behind one adapter interface (base.ClientAdapter); `--jetcheck-client` picks one.

`nats-py` is the real client. `nats-py+<variant>` wraps it in a deliberate deviation or a reference behaviour
(see variants.py); those exist for the suite's own proofs and say so in every result's `client.name`.
"""

from __future__ import annotations

from jetcheck.config import ConfigError

from .base import ClientAdapter, ClientEvent, ClientSession, Delivery, Documented, EventLog, StartPolicy
from .natspy import NatsPyAdapter

ADAPTERS = {"nats-py": NatsPyAdapter}

__all__ = [
    "ADAPTERS",
    "ClientAdapter",
    "ClientEvent",
    "ClientSession",
    "Delivery",
    "Documented",
    "EventLog",
    "StartPolicy",
    "adapter_for",
]


def adapter_for(name: str) -> ClientAdapter:
    """The adapter called `name` (`client`, `client+variant`, `client+variant+variant`...); ConfigError names the
    known ones."""
    from .variants import VARIANTS

    base, *variants = name.split("+")
    if base not in ADAPTERS:
        raise ConfigError(f"unknown client {base!r}; known: {', '.join(ADAPTERS)}")
    adapter = ADAPTERS[base]()
    for variant in variants:  # each wraps the one before: nats-py+adr37-heartbeats+terminal-on-missed-heartbeat
        if variant not in VARIANTS:
            raise ConfigError(f"unknown client variant {variant!r}; known: {', '.join(VARIANTS)}")
        adapter = VARIANTS[variant](adapter)
    return adapter
