"""An nkey user authenticates with --nkey-seed: nats-py signs the server's nonce only when `nkeys` is installed."""

from __future__ import annotations

import os
import subprocess
import sys

import nacl.signing
import nkeys

from jetcheck.fixtures.binaries import wheel_binary
from jetcheck.fixtures.process import NatsServerProcess

from .conftest import SERVER_VERSION


def _user_seed() -> tuple[bytes, str]:
    """A fresh user nkey: (seed as written to a seed file, public key the server config names)."""
    raw = nacl.signing.SigningKey.generate().encode()
    seed = nkeys.encode_seed(raw, nkeys.PREFIX_BYTE_USER)
    return seed, nkeys.from_seed(bytearray(seed)).public_key.decode()


def test_certify_authenticates_an_nkey_user_from_a_seed_file(tmp_path):
    """`--nkey-seed FILE` reaches a server that only admits that nkey: the dependency that signs is installed."""
    seed, public = _user_seed()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed + b"\n")
    server = NatsServerProcess(
        wheel_binary(SERVER_VERSION),
        tmp_path / "server",
        config=f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n',
    )
    server.start()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "jetcheck.cli", "certify", "--server", server.url, "--nkey-seed", str(seed_file),
             "--out", str(tmp_path / "out"), "--", "-m", "dedup"],
            capture_output=True, text=True, timeout=300, env={**os.environ},
        )  # fmt: skip
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-2000:]
    assert seed.decode() not in done.stdout + done.stderr
