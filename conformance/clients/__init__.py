"""Clients under test, behind one adapter interface (base.ClientAdapter); `--jetcheck-client` picks one.

`nats-py[@version]` is the real client (another release than the installed one runs with it first on PYTHONPATH:
client_environment). `nats.js[@version]`, `nats.go[@version]`, `async-nats[@version]` and `jnats[@version]` run
through a driver process (driven_clients.py, drivers/PROTOCOL.md). `<client>+<variant>` is a deliberate deviation
or a reference behaviour, for a test suite's own proofs; the product knows none: a plugin registers them
(register_variant; the suite's own are jetcheck.testing's, which its pytest plugin registers), and every result's
`client.name` carries them.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from jetcheck.errors import ConfigError
from jetcheck.specs import ClientSpec

from . import features  # noqa: F401  (attaches the server-feature ops to both sessions)
from .base import (
    ClientAdapter,
    ClientEvent,
    ClientSession,
    ConnectOptions,
    ConsumeOptions,
    Delivery,
    Documented,
    EventLog,
    OrderedOptions,
    PushOptions,
    StartPolicy,
)
from .build import natspy_installed, natspy_release
from .natspy import NatsPyAdapter

# None: driven (driven_clients.py)
ADAPTERS = {"nats-py": NatsPyAdapter, "nats.js": None, "nats.go": None, "async-nats": None, "jnats": None}


@dataclass(frozen=True)
class ClientVariant:
    """What `<client>+<name>` does: an in-process adapter is wrapped by `wrap`; a driven client's driver is asked
    for `driver_mode` (drivers/PROTOCOL.md `misbehave`); a variant without one is not offered for that kind."""

    name: str
    wrap: Callable[[ClientAdapter], ClientAdapter] | None = None
    driver_mode: str = ""


VARIANTS: dict[str, ClientVariant] = {}


def register_variant(variant: ClientVariant) -> None:
    """Offer `<client>+<variant.name>` from now on; registering the same variant again changes nothing."""
    if VARIANTS.get(variant.name, variant) != variant:
        raise ValueError(f"client variant {variant.name!r} is registered already, as something else")
    VARIANTS[variant.name] = variant


__all__ = [
    "ADAPTERS",
    "ClientAdapter",
    "ClientEvent",
    "ClientSession",
    "ClientVariant",
    "ConnectOptions",
    "ConsumeOptions",
    "Delivery",
    "Documented",
    "EventLog",
    "OrderedOptions",
    "PushOptions",
    "StartPolicy",
    "adapter_for",
    "client_environment",
    "register_variant",
]


def adapter_for(name: str) -> ClientAdapter:
    """The adapter called `name` (`client[@version]`, then any `+variant`s); ConfigError names the known ones.

    A driven client's adapter is shared by the whole run (one driver process); nothing starts until it connects;
    its variants are the driver's misbehave modes. An in-process client's variant wraps the one before it."""
    from .driven_clients import MISBEHAVE_MODES, driven_adapter

    client = ClientSpec(name)  # the option's spec, or a caller's text
    base, version, names = client.name, client.release, client.variants
    if base not in ADAPTERS:
        raise ConfigError(f"unknown client {base!r}; known: {', '.join(ADAPTERS)}")
    for variant in names:
        if variant not in VARIANTS:
            known = ", ".join(VARIANTS) or "none are registered (a plugin registers them)"
            raise ConfigError(f"unknown client variant {variant!r}; known: {known}")
    variants = [VARIANTS[variant] for variant in names]
    if ADAPTERS[base] is None:
        for variant in variants:
            if not variant.driver_mode:
                raise ConfigError(f"client variant {variant.name!r} is no {base} driver mode; the driver's modes: "
                                  f"{', '.join(MISBEHAVE_MODES)}")  # fmt: skip
        return driven_adapter(base, version, [v.driver_mode for v in variants])
    if version and version != natspy_installed():
        raise ConfigError(
            f"this interpreter imports {base} {natspy_installed()}, not {version}: `jetcheck certify --client "
            f"{base}@{version}` installs that release and runs the checks with it"
        )
    adapter = ADAPTERS[base]()
    for variant in variants:  # each wraps the one before: nats-py+adr37-heartbeats+terminal-on-missed-heartbeat
        if variant.wrap is None:
            raise ConfigError(f"client variant {variant.name!r} exists for driven clients only, not {base}")
        adapter = variant.wrap(adapter)
    return adapter


def client_environment(name: str) -> dict[str, str]:
    """What a run of the client `name` needs in its pytest process's environment: for a nats-py release other than
    the installed one, PYTHONPATH leading to it (installed into jetcheck's cache now, once); else nothing."""
    client = ClientSpec(name)
    release = natspy_release(client.release) if client.name == "nats-py" and client.release else None
    if release is None:
        return {}
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(release), os.environ.get("PYTHONPATH", "")) if p)}


def without_release(name: str) -> str:
    """`name` with an in-process client's release left out: the adapter this process checks variants with."""
    client = ClientSpec(name)
    head = client.name if ADAPTERS.get(client.name) is not None else client.without_variants
    return "+".join([head, *client.variants])
