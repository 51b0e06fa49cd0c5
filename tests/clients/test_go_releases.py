"""nats.go at any release from its first `jetstream` package (v1.26.0): the driver builds against the release asked
for with that release's own dependencies, leaving out each feature file the release cannot compile; what it lacks
answers `not_in_release` with the API names the compiler did not find, and checks meeting it are `na`."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.conformance.clients.build import SOURCES, _lacks, go_driver
from jetcheck.errors import ConfigError
from jetcheck.records import RESULTS_FILE

OLD = "v1.31.0"  # KV but no object store, no push consumers, no TTLs, no pause, no priority groups
NKEYS_OF_OLD = "v0.4.5"  # what nats.go v1.31.0's own go.mod requires (the pinned release brings a newer one)

pytestmark = pytest.mark.skipif(shutil.which("go") is None and not Path("/usr/local/go/bin/go").exists(),
                                reason="go is not installed: the nats.go driver cannot be built")  # fmt: skip


def ask(driver: list[str], *requests: dict) -> list[dict]:
    lines = "".join(json.dumps({"id": i, **r}) + "\n" for i, r in enumerate(requests, 1))
    out = subprocess.run(driver, input=lines, capture_output=True, text=True, timeout=60, check=True).stdout
    answers = [json.loads(line) for line in out.splitlines()]
    return sorted(answers, key=lambda answer: answer["id"])  # the driver answers requests concurrently


def test_the_compilers_words_become_the_api_names_a_release_lacks():
    said = [
        "undefined: jetstream.ObjectInfo",
        "s.js.ObjectStore undefined (type jetstream.JetStream has no field or method ObjectStore)",
        "unknown field DeliverSubject in struct literal of type jetstream.ConsumerConfig",
        "cfg.LimitMarkerTTL undefined (type *jetstream.KeyValueConfig has no field or method LimitMarkerTTL)",
        "undefined: jetstream.ErrObjectNotFound",
    ]
    assert _lacks(said, {}) == (
        "jetstream.JetStream.ObjectStore, jetstream.ObjectInfo, jetstream.ConsumerConfig.DeliverSubject and 2 more"
    )
    needing = {"objectstore.go": ("func objectError(err error) error {\n", "jetstream.JetStream.ObjectStore")}
    assert _lacks(["undefined: objectError"], needing) == "jetstream.JetStream.ObjectStore"
    assert _lacks(["not enough arguments in call to f"], {}) == "not enough arguments in call to f"


def test_an_old_release_is_built_with_its_own_dependencies_and_says_what_it_lacks(tmp_path):
    driver = go_driver(OLD, cache=tmp_path)
    hello, push = ask(driver, {"op": "hello"}, {"op": "push", "session": "s1", "sub": "p1", "stream": "S"})
    assert hello["result"]["version"] == OLD
    assert hello["result"]["libraries"]["github.com/nats-io/nkeys"] == NKEYS_OF_OLD
    absent = hello["result"]["not_in_release"]
    assert absent["push"].startswith("jetstream.JetStream.PushConsumer"), absent
    assert "(ops obj_add_link, obj_create," in absent["object-store"], absent
    assert "kv" not in absent and {"kv_put", "kv_watch", "ordered"} <= set(hello["result"]["ops"])
    assert push["error"]["kind"] == "not_in_release"
    assert push["error"]["message"].startswith(f"not in nats.go {OLD}: jetstream.JetStream.PushConsumer")


def test_the_pinned_release_leaves_nothing_out(tmp_path):
    hello, *_ = ask(go_driver(cache=tmp_path), {"op": "hello"})
    assert hello["result"]["not_in_release"] == {}
    assert {"push", "obj_put", "js_group_fetch", "kv_watch"} <= set(hello["result"]["ops"])


def test_a_core_that_does_not_compile_is_one_line_not_an_empty_driver(tmp_path):
    source = tmp_path / "go"
    shutil.copytree(SOURCES / "go", source)
    main = source / "main.go"
    main.write_text(main.read_text() + "\nfunc broken() { undefinedThing() }\n")
    with pytest.raises(ConfigError, match=r"the driver's core does not compile: main\.go: undefined: undefinedThing"):
        go_driver(cache=tmp_path / "cache", source=source)


def test_what_an_old_release_lacks_is_na_and_what_it_has_is_checked(tmp_path):
    """nats.go v1.31.0 has KV but no object store: object store client rules are na saying so; KV rules run."""
    out = tmp_path / "certify"
    code = cli.main(["certify", "--client", f"nats.go@{OLD}", "--out", str(out), "--", "-m",
                     "(objectstore or kv) and client"])  # fmt: skip
    results = [json.loads(line) for line in (out / RESULTS_FILE).read_text().splitlines()]
    assert code in (0, 1) and results
    assert {r["client"]["version"] for r in results} == {OLD.removeprefix("v")}
    store = [r for r in results if r["area"] == "objectstore"]
    assert store and all(r["status"] == "na" for r in store), [(r["id"], r["status"]) for r in store]
    assert all(r["message"].startswith(f"not in nats.go {OLD}: jetstream.JetStream.") for r in store)
    kv = {r["id"]: r["status"] for r in results if r["area"] == "kv"}
    assert kv["kv.put-get"] == "pass" and kv["kv.limit-markers-config"] == "na", kv
