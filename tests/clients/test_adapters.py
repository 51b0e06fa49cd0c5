"""The client-adapter registry, the --client option, and the event log scenarios await."""

from __future__ import annotations

import asyncio
from importlib import metadata

import pytest

from jetcheck.conformance.clients import adapter_for
from jetcheck.conformance.clients.base import MISSED_HEARTBEAT, EventLog
from jetcheck.errors import ConfigError
from jetcheck.options import resolve
from jetcheck.testing.variants import VARIANTS


def test_nats_py_is_the_default_client_and_reports_its_installed_version():
    """Without --client the suite certifies nats-py, under its installed version."""
    config = resolve(cli={}, env={})
    adapter = adapter_for(config.client)
    assert (config.client, adapter.name, adapter.version) == ("nats-py", "nats-py", metadata.version("nats-py"))


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_keeps_its_name_so_no_result_passes_for_the_real_client(variant):
    """nats-py+<variant> resolves to the variant, whose name carries the +variant suffix."""
    config = resolve(cli={"client": f"nats-py+{variant}"}, env={})
    assert adapter_for(config.client).name == f"nats-py+{variant}"


@pytest.mark.parametrize("value", ["go", "nats-py+", "nats-py+Bad_Name", "nats.rs+never-reset"])
def test_the_client_option_rejects_unknown_clients(value):
    """--client accepts only known clients, optionally with one +variant."""
    with pytest.raises(ConfigError, match="expected one of nats-py"):
        resolve(cli={"client": value}, env={})


def test_an_unknown_variant_is_a_config_error_naming_the_known_ones():
    """A well-formed but unknown variant fails when the adapter is chosen, listing the variants."""
    with pytest.raises(ConfigError, match="never-reset"):
        adapter_for("nats-py+no-such-variant")


@pytest.mark.asyncio
async def test_the_event_log_wakes_a_waiter_when_the_kind_arrives():
    """wait_for returns the first event of its kind after `since`, and None once the timeout passes."""
    log = EventLog()
    since = asyncio.get_running_loop().time()
    waiter = asyncio.create_task(log.wait_for(MISSED_HEARTBEAT, since, 2.0))
    log.add("error", "unrelated")
    log.add(MISSED_HEARTBEAT, "no heartbeat for 0.4s")
    event = await waiter
    assert (event.kind, event.detail) == (MISSED_HEARTBEAT, "no heartbeat for 0.4s")
    assert await log.wait_for(MISSED_HEARTBEAT, event.at + 1, 0.05) is None


def test_a_plugin_registers_its_own_variant_and_cannot_shadow_another(monkeypatch):
    """register_variant offers `nats-py+<name>` built by the wrapper; a second meaning for a name is refused."""
    from jetcheck.conformance import clients
    from jetcheck.testing.variants import WrappedAdapter, WrappedSession

    monkeypatch.setattr(clients, "VARIANTS", dict(clients.VARIANTS))
    mine = clients.ClientVariant("mine", lambda adapter: WrappedAdapter(adapter, "mine", WrappedSession))
    clients.register_variant(mine)
    clients.register_variant(mine)  # the same again changes nothing
    assert adapter_for("nats-py+mine").name == "nats-py+mine"
    with pytest.raises(ValueError, match="'mine' is registered already"):
        clients.register_variant(clients.ClientVariant("mine", driver_mode="duplicate-delivery"))
    with pytest.raises(ConfigError, match=r"'mine' is no nats\.go driver mode"):
        adapter_for("nats.go+mine")
