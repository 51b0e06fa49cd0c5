"""nats.js at any 3.x release: an option the installed @nats-io release does not declare in its type declarations is
answered `not_in_release` (drivers/js/release.mjs), never passed on to be dropped silently by a release that does not
know it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jetcheck.conformance.clients.build import SOURCES

NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: the nats.js driver cannot run")

# A package shaped as @nats-io/kv's lib/types.d.ts: options made of other types, comments naming options it lacks.
DECLARATIONS = """
/** markerTTL is not an option of KvLimits in this release: the comment must not count */
export type KvLimits = {
    history: number;
    ttl: number;
};
export type KvOptions = KvLimits & Partial<KvCodecs> & {
    timeout: number;
};
export type KvCodecs = { key: string; };
export interface KV extends RoKV {
    create(k: string, data: Uint8Array): Promise<number>;
}
export interface RoKV {
    get(k: string): Promise<number | null>;
}
export type KvPurgeOptions = KvDeleteOptions & {
    ttl: string;
};
export type KvDeleteOptions = { previousSeq: number; };
"""

PROBE = """
import { declares, requireDeclared } from "./release.mjs";
const asked = JSON.parse(process.argv[2]);
const pattern = (member) => (member.startsWith("/") ? new RegExp(member.slice(1, -1)) : member);
const found = asked.map(([type, member]) => declares("@nats-io/kv", type, pattern(member)));
let refusal = null;
try {
  requireDeclared("@nats-io/kv", "KvOptions", "markerTTL");
} catch (err) {
  refusal = { kind: err.kind, message: err.message };
}
console.log(JSON.stringify({ found, refusal }));
"""


@pytest.fixture
def release(tmp_path) -> Path:
    """A folder holding the driver's release.mjs and a fake @nats-io/kv 3.0.9 with DECLARATIONS."""
    package = tmp_path / "node_modules" / "@nats-io" / "kv"
    (package / "lib").mkdir(parents=True)
    (package / "package.json").write_text(json.dumps({"name": "@nats-io/kv", "version": "3.0.9", "main": "lib/mod.js"}))
    (package / "lib" / "mod.js").write_text("export {};\n")
    (package / "lib" / "types.d.ts").write_text(DECLARATIONS)
    shutil.copy(SOURCES / "js" / "release.mjs", tmp_path / "release.mjs")
    (tmp_path / "probe.mjs").write_text(PROBE)
    return tmp_path


def test_a_type_declares_the_members_of_the_types_it_is_made_of_and_comments_do_not_count(release):
    asked = [
        ["KvOptions", "history"],  # from KvLimits, through A & B
        ["KvOptions", "key"],  # from Partial<KvCodecs>
        ["KvOptions", "timeout"],  # its own
        ["KvOptions", "markerTTL"],  # only in a comment
        ["KV", "get"],  # through extends
        ["KV", r"/\bcreate\([^)]*,[^)]*,[^)]*\)/"],  # a third parameter of create: not in this release
        ["KvPurgeOptions", "ttl"],
        ["KvDeleteOptions", "ttl"],
    ]
    out = subprocess.run([NODE, "probe.mjs", json.dumps(asked)], cwd=release, capture_output=True, text=True,
                         timeout=60, check=True).stdout  # fmt: skip
    answer = json.loads(out)
    assert answer["found"] == [True, True, True, False, True, False, True, False]
    assert answer["refusal"] == {"kind": "not_in_release", "message": "not in @nats-io/kv 3.0.9: KvOptions.markerTTL"}
