"""The held-out harness's judgement (jetcheck.conformance.heldout), on made-up result sets: no server runs here. And
the mined pairs themselves: each names catalog areas, releases in order and a program that exists."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetcheck.conformance.catalog import load_catalog
from jetcheck.conformance.heldout import MinedPair, compare, load_pairs, markdown_table, rate
from jetcheck.records import CheckResult
from jetcheck.versions import parse_version

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "validation" / "mined_pairs.toml"

PAIR = MinedPair(
    id="purge-bug",
    area="purge",
    areas=("purge", "streams"),
    rule="a purge removes what it says",
    source="ADR-10",
    buggy="2.14.1",
    fixed="2.14.2",
    fix="nats-server#1",
    description="made up",
    program="validation/programs/none.py",
)


def result(check: str, status: str, area: str = "purge", version: str = "2.14.1") -> CheckResult:
    return CheckResult(
        id=f"{area}.{check}",
        status=status,
        area=area,
        title="t",
        level="MUST",
        source="s",
        min_version="2.10.0",
        server_version=version,
        client={"name": "nats-py", "version": "2.16.0"},
        duration_s=0.1,
        check=f"conformance/checks/test_{area}.py::test_{check}",
    )


def test_a_check_that_fails_on_the_buggy_release_and_passes_on_the_fixed_one_in_the_bugs_area_catches_it():
    """An in-area fail -> pass is told apart, in area, and caught; the same status on both says nothing."""
    buggy = [result("keep", "fail"), result("seq", "pass")]
    fixed = [result("keep", "pass", version="2.14.2"), result("seq", "pass", version="2.14.2")]
    verdict = compare(PAIR, buggy, fixed)
    assert [(d.check.split("::")[1], d.buggy, d.fixed, d.in_area) for d in verdict.differences] == [
        ("test_keep", "fail", "pass", True)
    ]
    assert verdict.told_apart and verdict.told_apart_in_area and verdict.caught


def test_a_difference_outside_the_bugs_areas_tells_the_releases_apart_but_does_not_catch_the_bug():
    """A check of another area that changes status counts as told apart, not in area, not caught."""
    verdict = compare(PAIR, [result("x", "pass", area="kv")], [result("x", "fail", area="kv", version="2.14.2")])
    assert verdict.told_apart and not verdict.told_apart_in_area and not verdict.caught


def test_a_difference_another_known_bug_of_the_same_releases_explains_does_not_tell_the_pair_apart():
    """A check that proves another bug fixed between the same releases is shown, but neither tells apart nor catches."""
    verdict = compare(
        PAIR,
        [result("keep", "fail")],
        [result("keep", "pass", version="2.14.2")],
        explained={"test_keep": "nats-server#2, purge.keep"},
    )
    assert [d.explained_by for d in verdict.differences] == ["nats-server#2, purge.keep"]
    assert not (verdict.told_apart or verdict.told_apart_in_area or verdict.caught)
    assert "another bug: nats-server#2" in markdown_table([verdict])


def test_checks_without_an_outcome_on_either_release_are_not_compared():
    """na, skip, or a check run on one release only is counted as not compared, never as a difference."""
    buggy = [result("a", "na"), result("b", "pass"), result("c", "skip")]
    fixed = [result("a", "pass", version="2.14.2"), result("c", "fail", version="2.14.2")]
    verdict = compare(PAIR, buggy, fixed)
    assert (verdict.differences, verdict.not_compared) == ((), 3)
    assert not verdict.told_apart


def test_the_rate_and_the_table_count_each_pair_once():
    """Two pairs, one caught: the rate says 1 of 2, and the table has a row per pair and the rate line."""
    caught = compare(PAIR, [result("keep", "fail")], [result("keep", "pass", version="2.14.2")])
    missed = compare(PAIR, [result("keep", "pass")], [result("keep", "pass", version="2.14.2")])
    summary = rate([caught, missed])
    assert (summary.pairs, summary.told_apart, summary.in_area, summary.caught) == (2, 1, 1, 1)
    table = markdown_table([caught, missed])
    assert table.count("| purge-bug |") == 2 and "told apart 1/2 (50%)" in table


def test_the_mined_pairs_name_catalog_areas_ordered_releases_and_existing_programs():
    """Every pair's areas are catalog areas (so -m selects checks), buggy < fixed, and its program exists."""
    areas = {rule.area for rule in load_catalog().values()}
    pairs = load_pairs(PAIRS)
    assert len(pairs) >= 20
    for pair in pairs:
        assert set(pair.areas) <= areas, pair.id
        assert parse_version(pair.buggy) < parse_version(pair.fixed), pair.id
        assert (ROOT / pair.program).is_file(), pair.id


def test_a_pair_missing_a_field_is_refused(tmp_path):
    """A pair without its rule cannot be loaded."""
    bad = tmp_path / "pairs.toml"
    bad.write_text('[[pair]]\nid = "x"\narea = "purge"\nareas = ["purge"]\n', encoding="utf-8")
    with pytest.raises(ValueError, match="lacks rule"):
        load_pairs(bad)
