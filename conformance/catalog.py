"""The rule catalog: every documented behaviour the suite checks, as data (conformance/catalog/<area>.toml)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from jetcheck.records import LEVELS, SUBJECTS

CATALOG_DIR = Path(__file__).with_name("catalog")
_ID = re.compile(r"^[a-z][a-z0-9-]*\.[a-z0-9][a-z0-9.-]*$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
# What a MUST rule's source must name: a document (an ADR, the NATS docs or their error reference and API schemas, a
# client's own documentation, a release note or a fixed issue). Server code alone makes a SHOULD.
DOCUMENT = re.compile(
    r"\bADR-\d+|docs\.nats\.io|JetStream docs|jsm\.go schema|release notes?|/(?:pull|issues)/\d+|\bPR\b|"
    r"(?:nats\.js|nats\.go|nats-py)\b[^;]*\b(?:docs|documents|documented|README|types\.ts|godoc)|"
    r"each client's documented",
    re.IGNORECASE,
)
CHECKED_BY = ("", "durability")  # a certify check, or the command that judges the rule instead


class CatalogError(ValueError):
    pass


@dataclass(frozen=True)
class Rule:
    id: str
    area: str
    statement: str  # the rule as a sentence of fact
    level: str  # MUST | SHOULD
    source: str  # ADR section, docs page or server source path
    since: str  # first server version that has the rule
    varies: str = ""  # how the behaviour differs between server versions, when it does
    subject: str = "server"  # server: the server alone decides; client: the client under test takes part
    # "" for a rule a certify check (pytest) tests; else the jetcheck command that judges it ("durability": from a
    # recorded history under faults), which has no certify check and no proof row
    checked_by: str = ""

    def result_fields(self) -> dict[str, str]:
        """What a CheckResult of this rule says of the rule itself (jetcheck.records.CheckResult's names)."""
        return {
            "id": self.id,
            "area": self.area,
            "title": self.statement,
            "level": self.level,
            "source": self.source,
            "min_version": self.since,
            "subject": self.subject,
        }


def parse_area(text: str, origin: str) -> list[Rule]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise CatalogError(f"{origin}: not valid TOML: {exc}") from None
    area = data.get("area")
    if not area or not isinstance(area, str):
        raise CatalogError(f"{origin}: missing top-level 'area'")
    rules = []
    entries = data.get("rule", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise CatalogError(f"{origin}: rules must be [[rule]] tables")
    for entry in entries:
        try:
            rule = Rule(area=area, **entry)
        except TypeError:  # a missing or unknown key
            raise CatalogError(f"{origin}: a [[rule]] needs exactly the keys of Rule, not {sorted(entry)}") from None
        if not all(isinstance(value, str) for value in vars(rule).values()):
            raise CatalogError(f"{origin}: {rule.id!r}: every value of a rule is a string")
        if not _ID.match(rule.id) or not rule.id.startswith(area + "."):
            raise CatalogError(f"{origin}: rule id {rule.id!r} must look like '{area}.some-rule'")
        if rule.level not in LEVELS:
            raise CatalogError(f"{origin}: {rule.id}: level {rule.level!r} is not one of {LEVELS}")
        if not _VERSION.match(rule.since):
            raise CatalogError(f"{origin}: {rule.id}: since {rule.since!r} is not X.Y.Z")
        if rule.subject not in SUBJECTS:
            raise CatalogError(f"{origin}: {rule.id}: subject {rule.subject!r} is not one of {SUBJECTS}")
        if rule.checked_by not in CHECKED_BY:
            raise CatalogError(f"{origin}: {rule.id}: checked_by {rule.checked_by!r} is not one of {CHECKED_BY}")
        if not rule.statement.strip() or not rule.source.strip():
            raise CatalogError(f"{origin}: {rule.id}: statement and source are required")
        if rule.level == "MUST" and not DOCUMENT.search(rule.source):
            raise CatalogError(
                f"{origin}: {rule.id}: a MUST rule's source names a document (an ADR, docs.nats.io, a client's "
                f"documentation, a release note or a fixed issue), not only server code: {rule.source!r}"
            )
        rules.append(rule)
    return rules


@cache
def load_catalog(directory: Path | None = None) -> dict[str, Rule]:
    """All rules by id (from CATALOG_DIR unless told otherwise); a duplicate id or a malformed entry is a
    CatalogError."""
    catalog: dict[str, Rule] = {}
    for path in sorted((directory or CATALOG_DIR).glob("*.toml")):
        for rule in parse_area(path.read_text(encoding="utf-8"), path.name):
            if rule.id in catalog:
                raise CatalogError(f"{path.name}: duplicate rule id {rule.id}")
            catalog[rule.id] = rule
    return catalog


def certify_rules(directory: Path | None = None) -> dict[str, Rule]:
    """The rules certify's checks test (each has a check and a proof row); the others are judged by the command
    their `checked_by` names."""
    return rules_checked_by("", directory)


def rules_checked_by(command: str, directory: Path | None = None) -> dict[str, Rule]:
    """The rules the jetcheck command `command` judges ("" for certify's checks)."""
    return {rule_id: rule for rule_id, rule in load_catalog(directory).items() if rule.checked_by == command}
