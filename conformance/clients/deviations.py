"""Deviations a client documents on purpose. Its rule still fails: a certificate holds every client to the documents
the rule cites. The failure then says, first, that the client means it, in the client's own words with a link, so a
reader sees both facts."""

from __future__ import annotations

from dataclasses import dataclass

from jetcheck.specs import ClientSpec

DEVIATION_PREFIX = "documented deviation"


@dataclass(frozen=True)
class DocumentedDeviation:
    client: str  # the client's name as results give it, without a +variant
    rules: frozenset[str]
    words: str  # quoted from the client's documentation
    link: str

    def label(self) -> str:
        return f'{DEVIATION_PREFIX}: {self.client} documents "{self.words}" ({self.link})'


DEVIATIONS = (
    DocumentedDeviation(
        "nats.js",
        frozenset({"kv.delete-marker", "kv.purge-marker"}),
        "Returns the KvEntry stored under the key if it exists or null if not. Note that the entry returned could be "
        'marked with a "DEL" or "PURGE" operation which signifies the server stored the value, but it is now deleted.',
        "https://github.com/nats-io/nats.js/blob/main/kv/src/types.ts (RoKV.get)",
    ),
)


def deviation_for(client: str, rule: str) -> DocumentedDeviation | None:
    """The deviation `client` (a results name, `+variant` and all) documents from `rule`, if it documents one."""
    name = ClientSpec(client).without_variants
    return next((d for d in DEVIATIONS if d.client == name and rule in d.rules), None)
