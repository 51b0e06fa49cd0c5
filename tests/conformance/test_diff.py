"""`jetcheck diff`: seeded programs on two servers; a difference is written with both answers, shrunk, with a script
that reproduces it; two servers that agree give exit 0."""

from __future__ import annotations

import subprocess
import sys

from jetcheck.conformance.diff import Difference, _programs, report
from jetcheck.conformance.oracle_runs import fewer_steps
from jetcheck.conformance.programs import Delete, Publish, Setup


def test_the_same_seed_gives_the_same_programs_and_another_seed_others():
    """Programs are generated from --seed alone: a rerun, or another machine, meets the same ones."""
    first, again, other = (list(_programs(20, seed)) for seed in (7, 7, 8))
    assert first == again
    assert first != other


def test_a_failing_program_is_offered_smaller_forms_one_change_at_a_time():
    """The shrinker drops one step (never the last one), then one header, msg id or payload of a publish."""
    program = [Publish("a", b"x", "m1", (("X-Note", "n"),)), Delete(1)]
    candidates = [c[1] for c in fewer_steps((Setup(), program))]
    assert [Publish("a", b"x", "m1", (("X-Note", "n"),))] in candidates
    assert [Delete(1)] in candidates
    assert [Publish("a", b"x", "m1", ()), Delete(1)] in candidates
    assert [Publish("a", b"x", None, (("X-Note", "n"),)), Delete(1)] in candidates
    assert [Publish("a", b"", "m1", (("X-Note", "n"),)), Delete(1)] in candidates
    assert not any(len(c) == 0 for c in candidates)


def test_the_report_names_both_sides_the_program_and_a_script():
    """diff.md gives each kind of difference its program, what each side answered and a nats-py script."""
    difference = Difference(Setup(), [Publish("b", b""), Delete(1)], ["MSG.GET last_by_subj b: A None, B 1"])
    text = report([difference], 100, ("A", "B"), "file")
    assert "100 programs on file streams: 1 kind(s) of difference." in text
    assert "1. `publish('b', b'')`" in text and "2. `delete(seq=1)`" in text
    assert "- MSG.GET last_by_subj b: A None, B 1" in text
    assert "```python" in text and "async def main(url):" in text


def test_a_release_against_itself_differs_in_nothing(tmp_path):
    """The embedded release against itself: every program gives the same outcome on both, exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "diff", "--programs", "8", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "8 programs, 0 kind(s) of difference" in proc.stdout
    assert "no difference." in (tmp_path / "diff.md").read_text()


def test_two_releases_that_differ_are_told_apart_with_a_minimal_program(tmp_path):
    """2.10.26 and 2.11.0 differ in last_by_subj after the subject's last message is deleted (a 2.10 bug, fixed in
    2.11.0; docs/servers/nats-server.md): diff names it with a three-step program and exits 1."""
    proc = subprocess.run(
        [sys.executable, "-m", "jetcheck.cli", "diff", "--server-version", "2.10.26", "--against", "2.11.0",
         "--programs", "100", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "MSG.GET last_by_subj" in proc.stdout, proc.stdout
    assert "; delete(seq=2)" in proc.stdout, proc.stdout
