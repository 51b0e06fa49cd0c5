"""Test doubles for showing that conformance checks can fail: jetcheck's own proofs use them, and so can yours.

Nothing in jetcheck's product imports this package; it builds on the product's extension points instead: the
fault proxy applies any `Breaker` (jetcheck.fixtures.proxy), and `--client` offers any registered client variant
(jetcheck.conformance.clients.register_variant).

Break a server rule on the wire (the server, as every client sees it, deviates):

    from jetcheck.fixtures.proxy import NatsProxy
    from jetcheck.testing import breakers_named

    async with NatsProxy.for_url(server_url, breakers=breakers_named("strip-msg-id")) as proxy:
        ...  # certify or connect through proxy.url; proxy.counters.breaker_hits counts what each changed

    python -m jetcheck.testing.proxy --upstream nats://127.0.0.1:4222 --break strip-msg-id,purge-drop-keep

`BREAKERS` maps every name to a factory (a fresh `Breaker` per proxy). Write your own with the helpers of
`jetcheck.testing.breakers` (`json_request_rewriter`, `headers_remover`, `ReplyRewriter`, `request_rewriting`,
`dropping`, `compose`), or any `Breaker(name, client_to_server, server_to_client)` of hooks
frame -> frame | [frames] | None.

Break a client rule (the client under test misbehaves): load the plugin, then name a variant after the client.

    jetcheck certify --client nats-py+duplicate-delivery -- -p jetcheck.testing.plugin
    pytest -p jetcheck.testing.plugin --jetcheck-client nats.js+swallow-missed-heartbeat ...

`CLIENT_VARIANTS` lists them: the driver protocol's misbehave modes (an in-process adapter is wrapped; a driven
client's driver misreports), and nats-py's `never-reset` and `adr37-heartbeats` (a reference that reports missed
heartbeats as ADR-37 asks). Results name the variant, so none passes for the real client.

Synthetic runs for what reads results (reports, your own tooling): `write_load_run(folder, LoadSpec(records=...))`,
`write_certify_run(folder, sample_results(...))`, all derived from a seed.
"""

from __future__ import annotations

from jetcheck.fixtures.proxy import Breaker

from .breaker_registry import BREAKERS, breakers_named
from .synthetic import LoadSpec, sample_results, write_certify_run, write_load_run
from .variants import VARIANTS as CLIENT_VARIANTS
from .variants import register_variants

__all__ = [
    "BREAKERS",
    "CLIENT_VARIANTS",
    "Breaker",
    "LoadSpec",
    "breakers_named",
    "register_variants",
    "sample_results",
    "write_certify_run",
    "write_load_run",
]
