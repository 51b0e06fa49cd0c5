"""Each client's Documented table is a set of facts about someone else's client: every entry says where the client
documents it, the ordered consumer's config declares every setting the checks look at (a key left out would go
unchecked), and an ordered push consumer's table agrees with ADR-17. The checks then compare what the client does
with the table (test_ordered.py, test_heartbeat_client.py, test_push.py, test_objectstore.py)."""

from __future__ import annotations

import dataclasses

import pytest

from jetcheck.conformance.checks.test_ordered import ORDERED_KEYS
from jetcheck.conformance.clients.base import ADR17_ORDERED_PUSH_CONFIG, Documented
from jetcheck.conformance.clients.driven_clients import GO_DOCUMENTED, JS_DOCUMENTED, RUST_DOCUMENTED
from jetcheck.conformance.clients.natspy import DOCUMENTED as PY_DOCUMENTED

TABLES = {"nats-py": PY_DOCUMENTED, "nats.js": JS_DOCUMENTED, "nats.go": GO_DOCUMENTED, "async-nats": RUST_DOCUMENTED}
ENTRIES = [f.name for f in dataclasses.fields(Documented) if f.name not in ("sources", "of_release")]


@pytest.mark.parametrize("client", TABLES)
def test_every_entry_says_where_the_client_documents_it(client):
    """Each entry of the table has a source, and every source names an entry."""
    sources = TABLES[client].sources
    assert sorted(set(ENTRIES) - set(sources)) == [], f"{client}: entries without a source"
    assert sorted(set(sources) - set(ENTRIES)) == [], f"{client}: sources of no entry"
    assert all(text.strip() for text in sources.values())


@pytest.mark.parametrize("client", TABLES)
def test_the_ordered_config_declares_every_setting_the_checks_compare(client):
    """A setting left out of ordered_config would never be compared: each one is declared, None for 'not set'."""
    assert [key for key in ORDERED_KEYS if key not in TABLES[client].ordered_config] == []


@pytest.mark.parametrize("client", [name for name, table in TABLES.items() if table.ordered_kind == "push"])
def test_an_ordered_push_consumers_table_agrees_with_adr_17(client):
    """ADR-17's settings for an ordered push subscription are what the table says (the check holds the client to
    ADR-17 in any case)."""
    config = TABLES[client].ordered_config
    assert {key: config.get(key) for key in ADR17_ORDERED_PUSH_CONFIG} == ADR17_ORDERED_PUSH_CONFIG
