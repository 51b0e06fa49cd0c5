"""Run the mined bugs' nats-py programs by hand on their last buggy and first fixed releases.

Each program (validation/programs/<id>.py) takes a server URL and exits 1 when the bug shows, 0 when it does not.
A pair reproduces when its program exits 1 on the buggy release and 0 on the fixed one. One server at a time, each
on a free 127.0.0.1 port with a fresh store, stopped after its program.

    python scripts/reproduce_mined.py [ID ...]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from jetcheck.fixtures.binaries import wheel_binary

ROOT = Path(__file__).resolve().parent.parent
PAIRS_FILE = ROOT / "validation" / "mined_pairs.toml"
PROGRAM_TIMEOUT_S = 60


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_program(version: str, program: Path) -> tuple[int, str]:
    """The program's exit status and output against a fresh single server of `version`."""
    binary = wheel_binary(version)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="heldout-") as store:
        server = subprocess.Popen(
            [str(binary), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", store],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                import socket

                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    time.sleep(0.05)
            proc = subprocess.run(
                [sys.executable, str(program), f"nats://127.0.0.1:{port}"],
                capture_output=True,
                text=True,
                timeout=PROGRAM_TIMEOUT_S,
            )
            return proc.returncode, (proc.stdout + proc.stderr).strip()
        except subprocess.TimeoutExpired:
            return -1, "timed out"
        finally:
            server.terminate()
            server.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="pair ids (default: all)")
    parser.add_argument("--pairs", default=str(PAIRS_FILE))
    parser.add_argument("--buggy", help="run the program of one id on this version instead")
    args = parser.parse_args()
    pairs = tomllib.loads(Path(args.pairs).read_text())["pair"]
    chosen = [p for p in pairs if not args.ids or p["id"] in args.ids]
    reproduced = 0
    for pair in chosen:
        program = ROOT / pair["program"]
        buggy = run_program(pair["buggy"], program)
        fixed = run_program(pair["fixed"], program)
        ok = buggy[0] == 1 and fixed[0] == 0
        reproduced += ok
        print(
            f"{pair['id']}: {pair['buggy']} exit {buggy[0]}, {pair['fixed']} exit {fixed[0]}: "
            f"{'reproduced' if ok else 'NOT reproduced'}"
        )
        for version, (_code, out) in ((pair["buggy"], buggy), (pair["fixed"], fixed)):
            for line in out.splitlines()[-3:]:
                print(f"    {version}: {line}")
    print(f"{reproduced} of {len(chosen)} reproduced")
    return 0 if reproduced == len(chosen) else 1


if __name__ == "__main__":
    sys.exit(main())
