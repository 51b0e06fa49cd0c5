"""`--server` and `--client` are read in one place, jetcheck.specs: every other module asks a ServerSpec or a
ClientSpec for its parts (issue 28: the server's text was checked by three if-chains, the client's
`client@release+variant` taken apart in five places)."""

from __future__ import annotations

import pickle
import re

import pytest

from jetcheck.errors import ConfigError
from jetcheck.specs import ClientSpec, ServerSpec, parse_client, parse_durability_server, parse_server

from .source_tree import ROOT, matches_outside

BY_HAND = {
    "a client spec split at @ or +": re.compile(r"\.(?:partition|split)\(\s*\"[@+]\"|\[@\+\]|\"[@+]\" (?:not )?in "),
    "a server spec read by its prefix": re.compile(
        r"startswith\(\s*(?:\"(?:container|cluster-file|nats://|tls://)|CONTAINER_IMAGE|CLUSTER_FILE|URL_SCHEMES)"
    ),
    "a server spec compared with a kind": re.compile(
        r"\bserver\w*\s*(?:==|!=|(?:not )?in)\s*\(?\"(?:local|system|cluster|container)\""
    ),
}


def test_no_module_but_specs_reads_a_spec_by_hand():
    found = matches_outside(ROOT / "jetcheck" / "specs.py", BY_HAND)
    assert not found, "a spec read by hand (ask jetcheck.specs' ServerSpec or ClientSpec):\n" + "\n".join(found)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("nats-py", ("nats-py", "", ())),
        ("nats.go@v1.55.0", ("nats.go", "v1.55.0", ())),
        (
            "nats.js@3.4.0+duplicate-delivery+watch-drop-first",
            ("nats.js", "3.4.0", ("duplicate-delivery", "watch-drop-first")),
        ),
        ("nats-py+never-reset", ("nats-py", "", ("never-reset",))),
    ],
)
def test_a_client_spec_has_its_parts_and_stays_its_text(text, parts):
    spec = parse_client(text)
    assert (spec.name, spec.release, spec.variants) == parts
    assert spec == text and str(spec) == text and f"{spec}" == text


@pytest.mark.parametrize(
    ("text", "kind", "image"),
    [
        ("local", "local", ""),
        ("system", "system", ""),
        ("cluster", "cluster", ""),
        ("container", "container", ""),
        ("container:nats:2.12", "container", "nats:2.12"),
        ("nats://127.0.0.1:4222", "url", ""),
        ("tls://user:pw@example.com:4222", "url", ""),
    ],
)
def test_a_server_spec_has_its_kind(text, kind, image):
    spec = parse_server(text)
    assert (spec.kind, spec.image, spec == text) == (kind, image, True)
    assert spec.managed == (kind != "url")


def test_a_described_cluster_is_a_path():
    spec = parse_durability_server("cluster-file:/etc/nodes.toml")
    assert (spec.kind, spec.path, spec.managed) == ("cluster-file", "/etc/nodes.toml", False)


@pytest.mark.parametrize(
    ("parse", "text", "refusal"),
    [
        (parse_client, "nats.rs", "expected one of nats-py"),
        (parse_client, "nats-py@v2.0.0", "expected one of nats-py"),  # nats-py's releases have no v
        (parse_server, "container:", "needs an image name"),
        (parse_server, "http://example.com:4222", "server must be"),
        (parse_durability_server, "local", "durability's server must be"),
        (parse_durability_server, "cluster-file: ", "durability's server must be"),
    ],
)
def test_a_spec_jetcheck_cannot_use_is_one_line(parse, text, refusal):
    with pytest.raises(ConfigError, match=refusal):
        parse(text)


def test_a_spec_survives_a_pickle_as_itself():
    """Specs cross process boundaries inside a Config (pytest-xdist, multiprocessing)."""
    for spec in (ClientSpec("nats.go@v1.55.0+duplicate-delivery"), ServerSpec("container:img")):
        again = pickle.loads(pickle.dumps(spec))
        assert (type(again), again, vars(again)) == (type(spec), spec, vars(spec))
