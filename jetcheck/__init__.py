"""jetcheck: protocol conformance and load testing for NATS JetStream."""

from importlib import metadata

try:
    __version__ = metadata.version("jetcheck")
except metadata.PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0+unknown"
