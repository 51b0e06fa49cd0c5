"""Versions are compared in one place, through packaging."""

from __future__ import annotations

import re

import pytest

from jetcheck.fixtures.binaries import binary_version
from jetcheck.versions import InvalidVersion, Version, parse_version, version_sort_key

from .source_tree import ROOT, matches_outside

THE_ONE_PLACE = ROOT / "jetcheck" / "versions.py"
# What comparing versions by hand looks like: numbers split out of a version, or a tuple of numbers to compare with.
BY_HAND = {
    "a tuple of ints parsed from text": re.compile(r"tuple\(int\("),
    "a comparison with a tuple of numbers": re.compile(r"[<>]=?\s*\(\d+,\s*\d+"),
    "a version turned into a tuple": re.compile(r"\b(?:version_tuple|since_tuple|_version_key|_numbers)\b"),
    "packaging used outside jetcheck.versions": re.compile(r"^\s*(?:from|import) packaging\b", re.MULTILINE),
}


class TestParseVersion:
    @pytest.mark.parametrize(
        ("older", "newer"),
        [
            ("2.12.0-RC.1", "2.12.0"),  # nats-server's release candidates come before the release
            ("2.12.0-beta.2", "2.12.0-RC.1"),
            ("2.11.9", "2.12.0-RC.1"),
            ("2.9.10", "2.10.0"),  # numbers, not text
            ("v1.48.0", "1.55.0"),  # Go module versions carry a v
            ("go1.26rc1", "go1.26.0"),  # Go toolchains: go1.26rc1 is older than go1.26.0
            ("go1.24.1", "1.26"),
            ("3.0.0-35", "3.0.0"),  # npm's numbered prerelease
        ],
    )
    def test_a_prerelease_and_a_prefix_sort_in_release_order(self, older, newer):
        """A prerelease sorts before its release; a leading v or go changes nothing."""
        assert parse_version(older) < parse_version(newer)
        assert sorted([newer, older], key=version_sort_key) == [older, newer]

    @pytest.mark.parametrize(("text", "same"), [("v1.55.0", "1.55.0"), ("go1.26.0", "1.26"), ("2.10", "2.10.0")])
    def test_spellings_of_one_release_are_equal(self, text, same):
        assert parse_version(text) == Version(same)

    @pytest.mark.parametrize("text", ["", "unknown", "latest", "2.x"])
    def test_text_that_is_no_version_is_refused(self, text):
        with pytest.raises(InvalidVersion):
            parse_version(text)

    def test_what_is_no_version_sorts_after_the_versions(self):
        assert sorted(["unknown", "2.15.1", "", "2.9.10"], key=version_sort_key) == ["2.9.10", "2.15.1", "", "unknown"]


def test_no_module_compares_versions_by_hand():
    """Every version comparison in the product goes through jetcheck.versions (packaging)."""
    assert matches_outside(THE_ONE_PLACE, BY_HAND) == []


@pytest.mark.parametrize(("says", "version"), [("v2.9.10", "2.9.10"), ("v2.12.0-RC.1", "2.12.0-RC.1")])
def test_a_binarys_version_is_read_whole(tmp_path, says, version):
    """A nats-server release candidate is not taken for the release: its version keeps the suffix."""
    binary = tmp_path / "nats-server"
    binary.write_text(f"#!/bin/sh\necho 'nats-server: {says}'\n")
    binary.chmod(0o755)
    assert binary_version(binary) == version
