"""ADR-19 (API prefixes for materialized JetStream views) through the client under test: on a private server with the
ADR's Testing accounts (fixtures.accounts: A has JetStream and exports its API and $KV.>; I imports them under
fromA), the client connects to account I with API prefix fromA and inbox prefix forI and uses a KV bucket that
lives in account A. The suite reads, over its own connections, what account I carried (a subscription on the
prefixed KV subjects) and what account A's bucket stored. Only a target the suite started offers the binary for
that server; against an external URL the check is na.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from jetcheck.conformance.clients.base import ClientError, ConnectOptions, Indeterminate, Unsupported, refusal
from jetcheck.conformance.jsapi import subject_messages
from jetcheck.conformance.plugin import na
from jetcheck.fixtures.accounts import API_PREFIX, INBOX_PREFIX, PrefixedAccounts
from jetcheck.fixtures.target import Target

pytestmark = pytest.mark.asyncio

ADR19 = (
    f"ADR-19: with JetStream API prefix {API_PREFIX} the KV API uses the same prefix, a put of key k in bucket b "
    f"is sent to {API_PREFIX}.$KV.b.k"
)


@pytest.fixture
def prefixed_accounts(target: Target) -> Iterator[PrefixedAccounts]:
    """ADR-19's test server, a sibling of the managed target from the same nats-server binary, for this check."""
    assert target.process is not None, "needs('managed') makes the check na against an external target"
    binary = getattr(target.process, "binary", None)  # a container's server has none on this machine
    if binary is None:
        na("needs the target's nats-server binary to start ADR-19's accounts beside it; the target runs in a container")
    server = PrefixedAccounts(binary).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.rule("prefix.kv-put")
@pytest.mark.needs("managed")
async def test_kv_put_through_an_api_prefix_goes_to_the_prefixed_kv_subject(client, prefixed_accounts, names):
    """With a JetStream API prefix p, a KV put of key k in bucket b is sent to p.$KV.b.k and stored in KV_b on
    $KV.b.k of the exporting account; create and get of the bucket work through the prefix."""
    bucket, key, value = names.bucket(), "k1", b"through the prefix"
    wanted = f"{API_PREFIX}.$KV.{bucket}.{key}"
    owner = await prefixed_accounts.target("a").connect()  # account A, where the bucket lives
    importer = await prefixed_accounts.target("i").connect()  # account I, where the client is
    carried: list[str] = []

    async def seen(msg) -> None:
        carried.append(msg.subject)

    try:
        # only the prefixed KV subjects: a subscription on $KV.> in account I would answer an unprefixed put itself
        await importer.subscribe(f"{API_PREFIX}.$KV.{bucket}.>", cb=seen)
        await importer.flush()
        try:
            prefixes = ConnectOptions(api_prefix=API_PREFIX, inbox_prefix=INBOX_PREFIX)
            session = await client.connect(prefixed_accounts.url, prefixed_accounts.credentials("i"), prefixes)
        except Unsupported as lacking:
            na(str(lacking))
        try:
            try:
                kv = await session.kv_create(bucket)
            except Indeterminate:
                raise
            except ClientError as refused:
                pytest.fail(f"{ADR19}; the client's KV create through the prefix was refused: {refused}")
            refused = await refusal(kv.put(key, value))
            await importer.flush()  # the put was answered (or refused) before: account I carried it by now
            stored = await subject_messages(owner, f"KV_{bucket}", f"$KV.{bucket}.{key}")
            assert refused is None and carried == [wanted] and [m.payload for m in stored] == [value], (
                f"{ADR19}: expected the put sent to {wanted} and stored in account A's KV_{bucket} on "
                f"$KV.{bucket}.{key}; account I carried {carried or 'nothing'} on {API_PREFIX}.$KV.{bucket}.>, "
                f"KV_{bucket} stored {len(stored)} message(s) there"
                + (f", and the client's put was refused: {refused}" if refused else "")
            )
            try:
                got = (await kv.get(key)).value
            except Indeterminate:
                raise
            except ClientError as refused:
                got = refused
            assert got == value, f"{ADR19}; a get through the prefix gave {got!r}, not the value put"
        finally:
            await session.close()
    finally:
        await importer.close()
        await owner.close()
