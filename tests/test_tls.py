"""A tls:// URL or any --tls-* option means TLS or nothing: no credential ever crosses the network in plain text.

The servers here that do not speak TLS are fakes on 127.0.0.1 that record every byte a client sends them, so each
test can show that nothing (no CONNECT, no password) reached a server that did not offer TLS.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
import sys
from pathlib import Path

import nats
import pytest
import pytest_asyncio

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.errors import TargetError
from jetcheck.fixtures.process import NatsServerProcess
from jetcheck.fixtures.proxy import NatsProxy
from jetcheck.fixtures.target import Credentials, Target, TlsEnforcingClient, probe

from .conftest import SERVER_VERSION, VENDOR_PASSWORD, self_signed

PASSWORD = "secret-pw-7f3a"
WAIT_S = 15.0
TLS_HANDSHAKE = 0x16  # first byte of a TLS record: a ClientHello
INFO = {
    "server_id": "FAKE",
    "server_name": "fake",
    "version": SERVER_VERSION,
    "proto": 1,
    "headers": True,
    "max_payload": 1048576,
    "jetstream": True,
    "auth_required": True,
}


class RecordingServer:
    """Opens every connection with an INFO (`info` plus `offer`), then records what the client sends until it stops
    or sends something: a client that talks on a connection that offers no TLS gets EOF, not an answer."""

    def __init__(self, **offer: bool) -> None:
        self.info = {**INFO, **offer}
        self.received = bytearray()
        self.connections = 0
        self._server: asyncio.base_events.Server | None = None
        self._handlers: set[asyncio.Task] = set()

    async def __aenter__(self) -> RecordingServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        await self._server.wait_closed()
        await asyncio.gather(*self._handlers)  # each ends at the client's first bytes or EOF

    def url(self, scheme: str) -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._handlers.add(asyncio.current_task())
        try:
            writer.write(f"INFO {json.dumps(self.info)}\r\n".encode())
            await writer.drain()
            self.received += await reader.read(64 * 1024)
        finally:
            writer.transport.abort()


async def jetcheck(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """`jetcheck ARGS` as a subprocess, so the fake server keeps answering on this test's event loop."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "jetcheck.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **(env or {})},
    )  # fmt: skip
    try:
        out, err = await asyncio.wait_for(proc.communicate(), 120)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    return proc.returncode, out.decode(), err.decode()


@pytest.fixture(scope="module")
def ca_file(tmp_path_factory) -> Path:
    cert, _key = self_signed(tmp_path_factory.mktemp("ca"), "ca", "/CN=jetcheck tls test CA")
    return cert


def command_line(command: str, url: str, how: str, ca_file: Path, tmp_path: Path) -> list[str]:
    """`command` against `url` asked to use TLS `how`: by a tls:// URL or by --tls-ca on a nats:// URL."""
    server = url if how == "tls-url" else url.replace("tls://", "nats://")
    tls = ["--tls-ca", str(ca_file)] if how == "tls-ca" else []
    per_command = {
        "certify": ["--out", str(tmp_path / "certify"), "--", "-m", "dedup"],
        "load": ["--scenario", "publish-async", "--duration", "2s", "--out", str(tmp_path / "load")],
        "run": ["--out", str(tmp_path / "run")],
    }
    return [command, "--server", server, "--user", "U", *tls, *per_command[command]]


@pytest.mark.asyncio
@pytest.mark.parametrize("how", ["tls-url", "tls-ca"])
@pytest.mark.parametrize("command", ["certify", "load", "run"])
async def test_a_server_that_does_not_offer_tls_gets_no_byte_and_the_command_exits_2(command, how, ca_file, tmp_path):
    """certify, load and run refuse, in one line and exit 2, a server whose INFO offers no TLS, before sending it
    anything: no CONNECT, no password, and (run) before any step starts."""
    async with RecordingServer() as server:
        rc, out, err = await jetcheck(
            *command_line(command, server.url("tls"), how, ca_file, tmp_path), env={"JETCHECK_PASSWORD": PASSWORD}
        )
    assert bytes(server.received) == b"", f"the client sent {bytes(server.received)[:80]!r} to a plain-text server"
    assert (rc, len(err.strip().splitlines())) == (2, 1), out + err
    assert err.startswith("jetcheck: ") and "does not offer TLS" in err, err
    assert server.connections >= 1, "the refusal must come from the server's INFO, not from not asking"
    assert PASSWORD not in out + err
    assert not (tmp_path / "load").exists()
    assert not (tmp_path / "run").exists(), "run started a step"


@pytest.mark.asyncio
@pytest.mark.parametrize("server", ["local", "cluster"])
async def test_tls_options_for_a_server_jetcheck_starts_are_refused(server, ca_file, tmp_path):
    """The servers jetcheck starts speak plain text on loopback: --tls-ca with them is a contradiction, not a hint."""
    rc, out, err = await jetcheck(
        "certify", "--server", server, "--tls-ca", str(ca_file), "--out", str(tmp_path), "--", "-m", "dedup"
    )
    assert (rc, len(err.strip().splitlines())) == (2, 1), out + err
    assert err.startswith("jetcheck: --tls-ca needs a nats:// or tls:// --server"), err


@pytest.mark.asyncio
async def test_a_server_that_only_makes_tls_available_is_spoken_to_in_tls():
    """INFO with tls_available (the server allows both): a client that requires TLS opens the handshake; it never
    sends CONNECT in plain text (nats-py on its own upgrades only on tls_required)."""
    async with RecordingServer(tls_available=True) as server:
        with pytest.raises(TargetError, match="TLS"):
            await Target(server.url("tls"), Credentials(user="U", password=PASSWORD)).connect()
    assert server.received[:1] == bytes([TLS_HANDSHAKE]), bytes(server.received)[:80]
    assert b"CONNECT" not in server.received and PASSWORD.encode() not in server.received


@pytest.mark.asyncio
async def test_the_last_guard_refuses_connect_over_plain_text_even_if_the_info_check_is_bypassed(monkeypatch):
    """Should the INFO check ever be skipped (a changed nats-py, a server changing its story), the client still
    refuses to write CONNECT on a connection that is not TLS."""
    monkeypatch.setattr(TlsEnforcingClient, "_process_info", nats.NATS._process_info)
    async with RecordingServer() as server:
        with pytest.raises(TargetError, match="does not offer TLS"):
            await Target(server.url("tls"), Credentials(user="U", password=PASSWORD)).connect()
    assert bytes(server.received) == b""


@pytest.mark.asyncio
async def test_a_url_target_without_tls_is_still_plain_and_recorded_as_such(embedded_server):
    """Nothing asked for TLS: the connection is plain text, and the probe says so (run.json's server.tls)."""
    nc = await embedded_server.connect()
    try:
        assert (await probe(nc)).tls is False
    finally:
        await nc.close()


@pytest.mark.asyncio
async def test_a_tls_server_is_probed_as_tls(vendor_server):
    """A real TLS server still works, over tls:// as over nats:// with its CA, and the probe records TLS."""
    server, d = vendor_server
    credentials = Credentials(user="vendor", password=VENDOR_PASSWORD, tls_ca=str(d / "ca.pem"))
    for url in (server.url, server.url.replace("nats://", "tls://")):
        nc = await Target(url, credentials).connect()
        try:
            assert (await probe(nc)).tls is True
        finally:
            await nc.close()


@pytest.fixture(scope="module")
def tls_optional_server(tmp_path_factory):
    """A real nats-server with TLS that also accepts plain text (`allow_non_tls`): its INFO says tls_available."""
    d = tmp_path_factory.mktemp("optional")
    cert, key = self_signed(d, "server", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1")
    config = f'tls {{ cert_file: "{cert}", key_file: "{key}" }}\nallow_non_tls: true\n'
    server = NatsServerProcess(wheel_binary(SERVER_VERSION), d / "server", config=config)
    server.start()
    yield server, cert
    server.stop()


@pytest.mark.asyncio
async def test_tls_options_upgrade_a_connection_the_server_would_allow_in_plain_text(tls_optional_server):
    """nats:// plus --tls-ca against a server that makes TLS optional: TLS is used, not skipped."""
    server, cert = tls_optional_server
    nc = await Target(server.url, Credentials(tls_ca=str(cert))).connect()
    try:
        info = await probe(nc)
        assert nc._server_info.get("tls_available") and info.tls is True
    finally:
        await nc.close()
    plain = await Target(server.url).connect()
    try:
        assert (await probe(plain)).tls is False  # the same server, nothing asked for TLS
    finally:
        await plain.close()


# ---------------------------------------------------------------------------------------------- the fault proxy
async def client_sees(proxy: NatsProxy, send: bytes = b"") -> bytes | ConnectionResetError:
    """What a raw client of `proxy` reads until the proxy closes its connection, having sent `send` first; the
    error when the proxy refuses the connection with a reset instead."""
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        seen = await asyncio.wait_for(reader.readline(), WAIT_S)
        if send and seen:
            writer.write(send)
            await writer.drain()
        return seen + await asyncio.wait_for(reader.read(), WAIT_S)
    except ConnectionResetError as refused:
        return refused
    finally:
        writer.close()


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "proxy_for",
    [
        lambda url: NatsProxy.for_url(url.replace("nats://", "tls://")),
        lambda url: NatsProxy.for_url(url, require_tls=True),
        lambda url: NatsProxy.for_url(url, upstream_tls=ssl.create_default_context(), require_tls=True),
    ],
    ids=["tls-url", "required-relayed", "required-terminated"],
)
async def test_the_proxy_refuses_an_upstream_that_does_not_offer_tls(proxy_for):
    """The proxy's upstream leg follows the same rule: the client gets no INFO but a refused connection, and the
    server nothing."""
    async with RecordingServer() as server:
        proxy = await proxy_for(server.url("nats")).start()
        try:
            assert isinstance(await client_sees(proxy, b"CONNECT {}\r\n"), ConnectionResetError)
            assert proxy.counters.tls_refused == 1
        finally:
            await proxy.stop()
    assert bytes(server.received) == b""


@pytest.mark.asyncio
async def test_a_relaying_proxy_passes_only_tls_upstream_when_tls_is_required():
    """Relaying (not terminating) TLS for a server that makes it optional, the proxy forwards the INFO, but a
    client that then talks plain text is cut before its bytes go upstream."""
    async with RecordingServer(tls_available=True) as server:
        proxy = await NatsProxy.for_url(server.url("tls")).start()
        try:
            seen = await client_sees(proxy, f'CONNECT {{"pass":"{PASSWORD}"}}\r\n'.encode())
            assert seen.startswith(b"INFO ") and PASSWORD.encode() not in seen
            assert proxy.counters.tls_refused == 1
        finally:
            await proxy.stop()
    assert bytes(server.received) == b""


@pytest_asyncio.fixture
async def terminating_proxy(vendor_server):
    server, d = vendor_server
    ca = Credentials(tls_ca=str(d / "ca.pem"))
    proxy = await NatsProxy.for_url(server.url, upstream_tls=ca.tls_context(), require_tls=True).start()
    yield proxy, d
    await proxy.stop()


@pytest.mark.asyncio
async def test_a_client_that_requires_tls_may_reach_the_server_through_the_proxy_that_speaks_it(terminating_proxy):
    """The fault proxy terminating the server's TLS is the one plain-text leg allowed (loopback, in this process):
    a client with the target's TLS options reaches the server through it; a plain proxy is still refused."""
    proxy, d = terminating_proxy
    credentials = Credentials(user="vendor", password=VENDOR_PASSWORD, tls_ca=str(d / "ca.pem"))
    nc = await Target(proxy.url, credentials).connect()
    try:
        assert (await probe(nc)).version
    finally:
        await nc.close()
    assert proxy.counters.tls_terminated == 1
    async with RecordingServer() as server:
        plain_proxy = await NatsProxy.for_url(server.url("nats")).start()
        try:
            with pytest.raises(TargetError, match="does not offer TLS"):
                await Target(plain_proxy.url, credentials).connect()
        finally:
            await plain_proxy.stop()
    assert bytes(server.received) == b""


@pytest.mark.asyncio
async def test_a_terminating_proxy_speaks_tls_to_a_server_that_makes_it_optional(tls_optional_server):
    """TLS required and only available upstream: the proxy upgrades its own leg rather than relay in plain text."""
    server, cert = tls_optional_server
    credentials = Credentials(tls_ca=str(cert))
    proxy = await NatsProxy.for_url(server.url, upstream_tls=credentials.tls_context(), require_tls=True).start()
    try:
        nc = await Target(proxy.url, credentials).connect()
        try:
            assert (await probe(nc)).version
        finally:
            await nc.close()
        assert (proxy.counters.tls_terminated, proxy.counters.tls_refused) == (1, 0)
    finally:
        await proxy.stop()
