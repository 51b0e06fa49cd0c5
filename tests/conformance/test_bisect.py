"""`jetcheck bisect`: the search certifies as few releases as a binary search needs and finds every change between
adjacent releases; releases come from the registry in order; a real bisect over nats-py releases, then its cache."""

from __future__ import annotations

import json
import math

import pytest

from jetcheck import cli
from jetcheck.conformance import bisect
from jetcheck.conformance.bisect import Release, Seen, changes


def _releases(count: int) -> list[Release]:
    return [Release(f"2.{i}.0", f"2020-01-{i + 1:02d}") for i in range(count)]


def test_each_change_between_adjacent_releases_is_found_with_few_certifies():
    """Sixteen releases, one rule failing from the tenth on, another passing from the fourth on, one that never
    changes: both changes are named between the right neighbours, certifying fewer than half of the releases."""
    ordered = _releases(16)
    certified: list[str] = []

    def seen_in(release: Release) -> dict[str, Seen]:
        certified.append(release.version)
        index = ordered.index(release)
        return {
            "a.late-break": Seen("fail" if index >= 10 else "pass", f"broken in {release.version}"),
            "b.early-fix": Seen("pass" if index >= 4 else "fail"),
            "c.steady": Seen("pass"),
        }

    memo: dict[str, dict[str, Seen]] = {}

    def once(release: Release) -> dict[str, Seen]:
        if release.version not in memo:
            memo[release.version] = seen_in(release)
        return memo[release.version]

    found = changes(ordered, once, ["a.late-break", "b.early-fix", "c.steady"])
    assert [(c.rule, c.before.version, c.was.status, c.after.version, c.now.status) for c in found] == [
        ("a.late-break", "2.9.0", "pass", "2.10.0", "fail"),
        ("b.early-fix", "2.3.0", "fail", "2.4.0", "pass"),
    ]
    assert found[0].now.message == "broken in 2.10.0"
    assert len(certified) == len(set(certified)) <= 2 + 2 * math.ceil(math.log2(16)) < len(ordered)


def test_a_rule_that_agrees_at_both_ends_is_not_searched():
    ordered = _releases(8)
    seen = []
    changes(ordered, lambda r: seen.append(r) or {"x.y": Seen("pass")}, ["x.y"])
    assert [r.version for r in seen] == ["2.0.0", "2.7.0"]


def test_two_certifies_that_disagree_make_a_status_unstable():
    """A change seen once may be a client's race: the same release certified again with another status is
    `unstable`, saying both; agreeing runs keep the status."""
    first = Seen("fail", "keys() listed []", ("fail",))
    assert first.again(Seen("fail", "keys() listed []", ("fail",))) == Seen(
        "fail", "keys() listed []", ("fail", "fail")
    )
    shaky = first.again(Seen("pass", "", ("pass",)))
    assert shaky.status == bisect.UNSTABLE and shaky.runs == ("fail", "pass")
    assert shaky.message == "fail, then pass on certifying the same release again: keys() listed []"


def test_releases_are_final_ordered_from_the_first_with_the_api_and_cut_to_the_range(monkeypatch):
    listed = [Release(v, "2024-01-01") for v in ("2.10.0", "2.2.0", "2.9.1", "2.1.7", "2.11.0rc1", "2.3.1")]
    monkeypatch.setitem(bisect.LISTS, "nats-py", lambda: listed)
    assert [r.version for r in bisect.releases("nats-py")] == ["2.2.0", "2.3.1", "2.9.1", "2.10.0"]
    assert [r.version for r in bisect.releases("nats-py", "2.3.0..2.9.1")] == ["2.3.1", "2.9.1"]
    assert [r.version for r in bisect.releases("nats-py", "..2.3.1")] == ["2.2.0", "2.3.1"]
    with pytest.raises(bisect.ConfigError, match="nothing to bisect"):
        bisect.releases("nats-py", "2.10.0..")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--rule", "purge.keep"], "purge.keep: a server rule"),
        (["--rule", "no.such-rule"], "no such rule: no.such-rule"),
        (["--client", "nats-py@2.2.0"], "without @release"),
        (["--releases", "2.2"], "--releases: expected A..B"),
    ],
)
def test_bad_bisects_are_one_line_and_exit_2(argv, said, tmp_path, capsys):
    code = cli.main(["bisect", "--out", str(tmp_path), *argv])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("\n") == 1, err


def test_a_bisect_over_nats_py_releases_names_the_release_that_changed_and_caches_it(tmp_path, monkeypatch, capsys):
    """nats-py's recreated ordered consumer left mem_storage unset (ADR-17: set it to true) before 2.3.0; a bisect
    over 2.2.0..2.3.1 names 2.2.0 -> 2.3.0 from certifying its three releases (the two of the change twice, to confirm
    it), and a second bisect certifies none."""
    monkeypatch.setattr(bisect, "bisect_cache", lambda: tmp_path / "cache")
    argv = ["bisect", "--client", "nats-py", "--rule", "ordered.recreated-config", "--releases", "2.2.0..2.3.1"]
    assert cli.main([*argv, "--out", str(tmp_path / "first")]) == 0
    out = capsys.readouterr().out
    found = json.loads((tmp_path / "first" / "bisect.json").read_text())
    assert [(c["rule"], c["before"]["version"], c["before"]["status"], c["after"]["version"], c["after"]["status"])
            for c in found] == [("ordered.recreated-config", "2.2.0", "fail", "2.3.0", "pass")], out  # fmt: skip
    assert "mem_storage None" in found[0]["before"]["message"]
    assert "5 certify run(s) now (3 releases), 0 release(s) from the cache" in out  # the two ends of the change twice
    assert cli.main([*argv, "--out", str(tmp_path / "second")]) == 0
    assert "0 certify run(s) now (0 releases), 3 release(s) from the cache" in capsys.readouterr().out
