#!/usr/bin/env bash
# Installs what jetcheck needs on a fresh machine: Debian's nats-server (the 2.9.10 in the version matrix), Chromium
# (renders the HTML report in tests), openssl, a JDK (Spark), iproute2 and nftables (durability's packet loss), fuse3
# (its power cuts) and, where no Docker engine answers, podman with runc (--server container) when missing, then a venv
# in .venv with jetcheck and its dependencies. Safe to run again: it only installs what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
[ -x /usr/sbin/nats-server ] || missing+=(nats-server)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
command -v java >/dev/null 2>&1 || missing+=(default-jre-headless)
# packet loss between durability's nodes: a network namespace of the run's own (ip) with nftables drop rules
command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || missing+=(iproute2)
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
# durability's power cuts: a FUSE layer under each node's store (libfuse3 and fusermount3)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
  command -v podman >/dev/null 2>&1 || missing+=(podman)
  command -v runc >/dev/null 2>&1 || [ -x /usr/sbin/runc ] || missing+=(runc)
fi
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: installing ${missing[*]} from Debian" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "bootstrap: please install ${missing[*]} (needs root and apt-get)" >&2
  fi
fi

# tox (run before this script) can leave a `.venv` file pointing into .tox/: it is not a virtualenv.
if [ -f .venv ] && grep -q '\.tox' .venv; then
  rm .venv
fi
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
if ! .venv/bin/python -c "import jetcheck, pytest_asyncio, pyspark, locust" >/dev/null 2>&1 \
   || [ pyproject.toml -nt .venv/.jetcheck-installed ]; then
  .venv/bin/pip install -q --disable-pip-version-check --upgrade pip
  .venv/bin/pip install -q --disable-pip-version-check -e '.[dev]'
  touch .venv/.jetcheck-installed
fi

# The nats.js, nats.go, async-nats and jnats drivers (--client): built now into jetcheck's cache so no run pays for
# it; a missing node/npm, Go, cargo or java/mvn is one line here and matters only to that client's runs.
# (called, not run with -m: the package imports build first, and runpy warns when a module it runs is imported)
.venv/bin/python -c "import sys; from jetcheck.conformance.clients.build import prebuild; sys.exit(prebuild())" || true
