"""What `--server` and `--client` name, read in one place (a shared leaf): `ServerSpec` and `ClientSpec`.

Each is the text the user gave (a `str`, so it goes on wherever the text went: a subprocess's command line or
environment, run.json, a message) with its parts read once, when it is made; the rest of jetcheck asks a spec for its
parts and never takes the text apart itself (tests/test_specs.py holds every other module to that). `parse_server`
and `parse_client` are the option table's checks: they refuse, with one line, what `ServerSpec(text)` and
`ClientSpec(text)` would read as nothing jetcheck knows.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from jetcheck.errors import ConfigError
from jetcheck.redact import redact_url

# The newest nats-server release on the index when this version of jetcheck was cut; --server-version overrides it.
DEFAULT_VERSION = "2.15.1"
MANAGED_SERVERS = ("local", "system", "cluster", "container")  # the --server values for servers the suite runs
VERSIONED_SERVERS = ("local", "cluster", "container")  # the ones whose release --server-version picks
CONTAINER_IMAGE = "container:"  # container:IMAGE runs the user's image, of the release it holds
CLUSTER_FILE = "cluster-file:"  # cluster-file:PATH: the user's cluster, described in a TOML file (durability)
URL_SCHEMES = ("nats://", "tls://")

CLIENTS = ("nats-py", "nats.js", "nats.go", "async-nats", "jnats")
# run through a driver process; `@version` picks a release
DRIVEN_CLIENTS = ("nats.js", "nats.go", "async-nats", "jnats")


class ServerSpec(str):
    """A `--server`: `kind` is local, system, cluster, container (`image` "" for the embedded release), cluster-file
    (`path`), url (nats:// or tls://) or "" (none of these)."""

    kind: str
    image: str
    path: str

    def __new__(cls, text: str) -> ServerSpec:
        spec = super().__new__(cls, text)
        spec.image = spec.path = ""
        if text in MANAGED_SERVERS:
            spec.kind = text
        elif text.startswith(CONTAINER_IMAGE):
            spec.kind, spec.image = "container", text.removeprefix(CONTAINER_IMAGE)
        elif text.startswith(CLUSTER_FILE):
            spec.kind, spec.path = "cluster-file", text.removeprefix(CLUSTER_FILE)
        elif text.startswith(URL_SCHEMES):
            spec.kind = "url"
        else:
            spec.kind = ""
        return spec

    @property
    def managed(self) -> bool:
        """True for a server the suite starts itself (and may restart or kill)."""
        return self.kind in MANAGED_SERVERS

    @property
    def versioned(self) -> bool:
        """True for a server whose release --server-version picks (jetcheck installs it)."""
        return self in VERSIONED_SERVERS


def is_managed(server: str) -> bool:
    """True for a server the suite starts itself (and may restart or kill)."""
    return ServerSpec(server).managed


class ClientSpec(str):
    """A `--client`: `client[@release][+variant...]`. `name` is the client, `release` the one asked for ("" for the
    default), `variants` the deliberate deviations it is wrapped in (for the suite's own proofs)."""

    name: str
    release: str
    variants: tuple[str, ...]

    def __new__(cls, text: str) -> ClientSpec:
        spec = super().__new__(cls, text)
        head, *variants = text.split("+")
        spec.name, _, spec.release = head.partition("@")
        spec.variants = tuple(variants)
        return spec

    @property
    def driven(self) -> bool:
        """True for a client run through a driver process."""
        return self.name in DRIVEN_CLIENTS

    @property
    def without_variants(self) -> str:
        """`client[@release]`."""
        return self.name + (f"@{self.release}" if self.release else "")


def parse_server(value: str) -> ServerSpec:
    """The option table's check of `--server`: local, system, cluster, container[:IMAGE] or a nats:// URL."""
    spec = ServerSpec(value)
    if value in MANAGED_SERVERS:
        return spec
    if spec.kind == "container":
        if not spec.image.strip() or any(c.isspace() for c in value):
            raise ConfigError(f"server container:IMAGE needs an image name without spaces, not {value!r}")
        return spec
    parts = url_parts(value)
    if parts is None:
        raise ConfigError(f"server URL needs a host and a port from 0 to 65535: {redact_url(value)!r}")
    if parts.scheme in ("nats", "tls") and parts.hostname:
        return spec
    raise ConfigError(
        f"server must be 'local', 'system', 'cluster', 'container[:IMAGE]' or a nats://host:port URL, "
        f"not {redact_url(value)!r}"
    )


def parse_durability_server(value: str) -> ServerSpec:
    """The option table's check of jetcheck durability's `--server`: cluster or cluster-file:PATH."""
    spec = ServerSpec(value)
    if spec.kind == "cluster" or (spec.kind == "cluster-file" and spec.path.strip()):
        return spec
    raise ConfigError(f"durability's server must be 'cluster' or '{CLUSTER_FILE}PATH', not {value!r}")


def parse_client(value: str) -> ClientSpec:
    """The option table's check of `--client`: a known client, optionally @release, optionally +variant..."""
    spec = ClientSpec(value)
    release = r"(@v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?)?" if spec.driven else r"(@\d+\.\d+\.\d+)?"
    if spec.name not in CLIENTS or not re.fullmatch(rf"[a-z0-9.-]+{release}(\+[a-z0-9-]+)*", value):
        raise ConfigError(
            f"expected one of {', '.join(CLIENTS)} (optionally @version: a release of that client; optionally "
            f"+variant...), not {value!r}"
        )
    return spec


def url_parts(value: str) -> SplitResult | None:
    """urlsplit's reading of `value`, port included; None when urlsplit cannot read it (an unclosed [ of an IPv6
    address, a port that is not a number from 0 to 65535)."""
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 -- urlsplit checks the port only when asked for it
    except ValueError:
        return None
    return parts
