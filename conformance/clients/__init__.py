"""Clients under test, behind one adapter interface (base.ClientAdapter); `--jetcheck-client` picks one.

`nats-py` is the real client. `nats-py+<variant>` wraps it in a deliberate deviation or a reference behaviour
(see variants.py); those exist for the suite's own proofs and say so in every result's `client.name`.
`nats.js[@version]` and `nats.go[@version]` run through a driver process (driven.py, drivers/PROTOCOL.md);
their `+<mode>` makes the driver misreport on purpose.
"""

from __future__ import annotations

from jetcheck.errors import ConfigError

from .base import ClientAdapter, ClientEvent, ClientSession, Delivery, Documented, EventLog, StartPolicy
from .natspy import NatsPyAdapter

ADAPTERS = {"nats-py": NatsPyAdapter, "nats.js": None, "nats.go": None}  # None: driven (driven.py)

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
    """The adapter called `name` (`client[@version]`, then any `+variant`s); ConfigError names the known ones.

    A driven client's adapter is shared by the whole run (one driver process); nothing starts until it connects;
    its variants are the driver's misbehave modes. A nats-py variant wraps the one before it."""
    from .driven import driven_adapter
    from .variants import VARIANTS

    spec, *variants = name.split("+")
    base, _, version = spec.partition("@")
    if base not in ADAPTERS:
        raise ConfigError(f"unknown client {base!r}; known: {', '.join(ADAPTERS)}")
    if ADAPTERS[base] is None:
        return driven_adapter(base, version, variants)
    if version:
        raise ConfigError(f"{base} is certified at its installed version; {name!r} asks for {version}")
    adapter = ADAPTERS[base]()
    for variant in variants:  # each wraps the one before: nats-py+adr37-heartbeats+terminal-on-missed-heartbeat
        if variant not in VARIANTS:
            raise ConfigError(f"unknown client variant {variant!r}; known: {', '.join(VARIANTS)}")
        adapter = VARIANTS[variant](adapter)
    return adapter
