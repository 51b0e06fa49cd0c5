"""fixtures.unix_bridge, which lets a fleet worker in a network namespace of its own reach the master and the server:
from inside a namespace with only its loopback, a bridged host port answers through the Unix socket, a host port
that is not bridged is refused, and a bridged port whose host server is gone closes the connection at once."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import sys
import threading

import pytest

from jetcheck.durability.packet_loss import own_namespace
from jetcheck.fixtures.unix_bridge import forwarder
from jetcheck.options import new_run_prefix

from .test_fleet_run import why_no_namespaces

pytestmark = pytest.mark.skipif(bool(why_no_namespaces()), reason=why_no_namespaces() or "-")

# run inside the namespace: send a line to the port, print what comes back
ECHO_CLIENT = """
import socket, sys
with socket.create_connection(("127.0.0.1", int(sys.argv[1])), 5) as connection:
    connection.sendall(b"ping through the bridge\\n")
    print(connection.makefile("rb").readline().decode().strip() or "closed")
"""


@contextlib.contextmanager
def echo_servers(count: int):
    """`count` line-echo servers on free host loopback ports, on a loop in a thread; yields their ports."""
    loop = asyncio.new_event_loop()
    ports: list[int] = []

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"echo " + await reader.readline())
        await writer.drain()
        writer.close()

    async def start() -> list[asyncio.Server]:
        return [await asyncio.start_server(echo, "127.0.0.1", 0) for _ in range(count)]

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    servers = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    ports.extend(server.sockets[0].getsockname()[1] for server in servers)
    try:
        yield ports
    finally:
        for server in servers:
            loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def inside(enter: list[str], *argv: str) -> str:
    done = subprocess.run([*enter, sys.executable, *argv], capture_output=True, text=True, timeout=60, check=True)
    return done.stdout.strip()


def test_a_namespace_reaches_bridged_host_ports_only(tmp_path):
    with echo_servers(2) as (bridged, not_bridged), contextlib.ExitStack() as stack:
        sockets = {bridged: tmp_path / f"{bridged}.sock"}
        stack.enter_context(forwarder("to-tcp", sockets))
        enter = stack.enter_context(own_namespace(f"{new_run_prefix()}-bridge"))
        stack.enter_context(forwarder("to-unix", sockets, prefix=enter))
        assert inside(enter, "-c", ECHO_CLIENT, str(bridged)) == "echo ping through the bridge"
        probe = inside(enter, "-m", "jetcheck.fixtures.unix_bridge", "probe", str(not_bridged))
        assert probe == f"{not_bridged} refused"
        # the same port from the host: it is there, only the namespace cannot see it
        assert inside([], "-c", ECHO_CLIENT, str(not_bridged)) == "echo ping through the bridge"


def test_a_bridged_port_whose_server_is_gone_is_closed_at_once(tmp_path):
    with echo_servers(1) as (gone,):
        pass  # the port was a server's and is free again: the host side's connect is refused
    with contextlib.ExitStack() as stack:
        sockets = {gone: tmp_path / f"{gone}.sock"}
        stack.enter_context(forwarder("to-tcp", sockets))
        enter = stack.enter_context(own_namespace(f"{new_run_prefix()}-bridge"))
        stack.enter_context(forwarder("to-unix", sockets, prefix=enter))
        assert inside(enter, "-c", ECHO_CLIENT, str(gone)) == "closed"
