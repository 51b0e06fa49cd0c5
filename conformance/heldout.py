"""Held-out validation (issue 42): mined nats-server bugs, each a pair of releases (the last with the bug, the first
with its fix), and whether `jetcheck certify` on the bug's areas tells the two releases apart.

The pairs live in validation/mined_pairs.toml; scripts/validate_oracles.py certifies both releases of each pair
through `jetcheck matrix` and judges the two result sets here, check by check."""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from jetcheck.records import CheckResult

from .matrix import differences

# Statuses that say what the server did; na and skip (and a check one release did not run) say nothing about it
RAN = ("pass", "fail", "error")
# The areas of the checks that are oracles: properties over generated programs, meant to catch bugs in any area.
ORACLE_AREAS = ("oracle", "model")
ORACLE_HOMES = ("kv", "sourcing")  # areas with an oracle among their example checks (kv.model-read-paths, ...)
PAIR_FIELDS = ("id", "area", "areas", "rule", "source", "buggy", "fixed", "fix", "description", "program")


@dataclass(frozen=True)
class MinedPair:
    """One fixed bug: `buggy` is the last release with it, `fixed` the first with its fix; `areas` are the catalog
    areas (certify markers) it falls in, `area` the main one; `rule` and `source` the documented rule it breaks."""

    id: str
    area: str
    areas: tuple[str, ...]
    rule: str
    source: str
    buggy: str
    fixed: str
    fix: str
    description: str
    program: str
    reproduced: str = ""

    @property
    def marker_expression(self) -> str:
        """The pytest -m expression that selects the oracles (which hold in every area), and the bug's areas where
        an oracle lives among their examples (ORACLE_HOMES); the other areas' examples were measured apart
        (validation/baseline-deb8ba8.md)."""
        return " or ".join((*ORACLE_AREAS, *(area for area in self.areas if area in ORACLE_HOMES)))


def load_pairs(path: Path) -> list[MinedPair]:
    """The pairs of a mined_pairs.toml; a pair missing a field, or an area list without its main area, is an error."""
    pairs = []
    for table in tomllib.loads(path.read_text(encoding="utf-8")).get("pair", []):
        missing = [name for name in PAIR_FIELDS if not table.get(name)]
        if missing:
            raise ValueError(f"{path}: pair {table.get('id', '?')} lacks {', '.join(missing)}")
        pair = MinedPair(**{**table, "areas": tuple(table["areas"])})
        if pair.area not in pair.areas:
            raise ValueError(f"{path}: pair {pair.id}: area {pair.area} is not among its areas {pair.areas}")
        pairs.append(pair)
    ids = [pair.id for pair in pairs]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{path}: pair ids repeat")
    return pairs


@dataclass(frozen=True)
class CheckDifference:
    """A check whose status differs between the two releases, both statuses being outcomes (pass, fail, error)."""

    check: str
    rule: str
    area: str
    buggy: str
    fixed: str
    in_area: bool  # the check's rule is in one of the bug's areas, or is an oracle
    explained_by: str = ""  # another known bug fixed between the same releases that this check proves

    @property
    def fails_the_bug(self) -> bool:
        """Failed (or errored) on the buggy release and passed on the fixed one, in the bug's area, and not a known
        other bug's proof: a catch."""
        return self.in_area and not self.explained_by and self.buggy in ("fail", "error") and self.fixed == "pass"


@dataclass(frozen=True)
class PairVerdict:
    """What certify said about one pair: the checks whose outcome differs, the checks that ran on only one release or
    had no outcome on one (not compared), and matrix's lines of rule and observed-behaviour differences."""

    pair: MinedPair
    differences: tuple[CheckDifference, ...]
    not_compared: int
    behaviour: tuple[str, ...]
    diff: str = ""  # what `jetcheck diff` of the two releases found first ("" for nothing, or when it did not run)

    @property
    def unexplained(self) -> tuple[CheckDifference, ...]:
        """The differences no other known bug of the same two releases accounts for."""
        return tuple(d for d in self.differences if not d.explained_by)

    @property
    def told_apart(self) -> bool:
        return bool(self.unexplained) or bool(self.diff)

    @property
    def told_apart_in_area(self) -> bool:
        return any(d.in_area for d in self.unexplained)

    @property
    def caught(self) -> bool:
        return any(d.fails_the_bug for d in self.differences)


def check_function(check: str) -> str:
    """The check function of a pytest node id: test_x of conformance/checks/test_purge.py::test_x[file]."""
    return check.split("::")[-1].split("[")[0]


def compare(
    pair: MinedPair, buggy: list[CheckResult], fixed: list[CheckResult], explained: Mapping[str, str] | None = None
) -> PairVerdict:
    """The checks whose outcome differs between the buggy and the fixed release's results, check by check (a check
    is its pytest node id, parameters included). `explained` maps check functions that prove another bug fixed
    between the same two releases to that bug: their differences are kept but do not tell this pair apart."""
    explained = explained or {}
    on_buggy = {r.check: r for r in buggy}
    on_fixed = {r.check: r for r in fixed}
    found, not_compared = [], 0
    for check in sorted(on_buggy.keys() | on_fixed.keys()):
        before, after = on_buggy.get(check), on_fixed.get(check)
        if before is None or after is None or before.status not in RAN or after.status not in RAN:
            not_compared += 1
            continue
        if before.status != after.status:
            found.append(
                CheckDifference(
                    check=check,
                    rule=before.id,
                    area=before.area,
                    buggy=before.status,
                    fixed=after.status,
                    in_area=before.area in pair.areas or before.area in ORACLE_AREAS,
                    explained_by=explained.get(check_function(check), ""),
                )
            )
    behaviour = tuple(differences({pair.buggy: buggy, pair.fixed: fixed}))
    return PairVerdict(pair, tuple(found), not_compared, behaviour)


@dataclass(frozen=True)
class Rate:
    pairs: int
    told_apart: int
    in_area: int
    caught: int


def rate(verdicts: list[PairVerdict]) -> Rate:
    return Rate(
        len(verdicts),
        sum(v.told_apart for v in verdicts),
        sum(v.told_apart_in_area for v in verdicts),
        sum(v.caught for v in verdicts),
    )


def short_check(check: str) -> str:
    """A check's node id without its folder: test_purge.py::test_x[file]."""
    path, _, name = check.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{name}"


def difference_text(d: CheckDifference, arrow: str = "->") -> str:
    note = f" (another bug: {d.explained_by})" if d.explained_by else ("" if d.in_area else " (outside its areas)")
    return f"{short_check(d.check)} {d.buggy}{arrow}{d.fixed}{note}"


def verdict_line(verdict: PairVerdict) -> str:
    """One line per pair for the terminal."""
    pair = verdict.pair
    said = ("CAUGHT" if verdict.caught else "told apart") if verdict.told_apart else "not told apart"
    if verdict.differences:
        said += ": " + ", ".join(difference_text(d) for d in verdict.differences)
    if verdict.diff:
        said += f"; jetcheck diff: {verdict.diff}"
    return f"{pair.id} ({pair.buggy} -> {pair.fixed}, -m '{pair.marker_expression}'): {said}"


def rate_line(summary: Rate) -> str:
    def share(n: int) -> str:
        return f"{n}/{summary.pairs} ({100 * n / summary.pairs:.0f}%)" if summary.pairs else "0/0"

    return (
        f"told apart {share(summary.told_apart)}; through a check of the bug's areas {share(summary.in_area)}; "
        f"caught (in-area check fails on buggy, passes on fixed) {share(summary.caught)}"
    )


def markdown_table(verdicts: list[PairVerdict], unrun: list[MinedPair] = ()) -> str:
    """The held-out table: one row per pair, then the rates."""
    lines = [
        "| pair | area | buggy → fixed | told apart | in its areas | caught | checks whose outcome differs | "
        "jetcheck diff | not compared | observed differences |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for v in verdicts:
        differing = "<br>".join(difference_text(d, "→") for d in v.differences)
        lines.append(
            f"| {v.pair.id} | {v.pair.area} | {v.pair.buggy} → {v.pair.fixed} | {'yes' if v.told_apart else 'no'} | "
            f"{'yes' if v.told_apart_in_area else 'no'} | {'yes' if v.caught else 'no'} | {differing or '-'} | "
            f"{v.diff.replace('|', '/') or '-'} | {v.not_compared} | {len(v.behaviour)} |"
        )
    for pair in unrun:
        lines.append(f"| {pair.id} | {pair.area} | {pair.buggy} → {pair.fixed} | did not run | | | | | | |")
    lines += ["", rate_line(rate(verdicts)) + (f"; {len(unrun)} pair(s) did not run" if unrun else ""), ""]
    return "\n".join(lines)
