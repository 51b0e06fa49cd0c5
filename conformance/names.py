"""The names a check gives what it creates, each carrying the run prefix and recorded in the run's ledger."""

from __future__ import annotations

import itertools
import re

from jetcheck.fixtures.cleanup import RunLedger


class Names:
    """Names for what one check creates: `<prefix>_<tag><n>`, the tag letters only. Stream and bucket names go
    into the run's ledger as they are handed out, so cleanup deletes them and nothing else."""

    def __init__(self, prefix: str, counter: itertools.count, ledger: RunLedger) -> None:
        self.prefix = prefix
        self._counter = counter
        self._ledger = ledger

    def _name(self, tag: str, separator: str = "_") -> str:
        if not re.fullmatch(r"[A-Za-z]+", tag):
            raise ValueError(f"a name's tag is letters only (the generated names cleanup knows), not {tag!r}")
        return f"{self.prefix}{separator}{tag}{next(self._counter)}"

    def stream(self, tag: str = "S") -> str:
        return self._ledger.record_stream(self._name(tag))

    def subject(self, tag: str = "s") -> str:
        """A subject root unique to this run and call; streams bind `<root>.>`."""
        return self._name(tag, ".")

    def consumer(self, tag: str = "C") -> str:
        return self._name(tag)

    def bucket(self, tag: str = "b") -> str:
        return self._ledger.record_bucket(self._name(tag))
