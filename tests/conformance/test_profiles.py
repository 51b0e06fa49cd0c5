"""Profiles: a certificate holds a target to a real release's rules, never to what a version string excuses."""

from __future__ import annotations

import json

import pytest

from jetcheck.conformance.profiles import profile_for
from jetcheck.records import RUN_FILE
from jetcheck.specs import DEFAULT_VERSION
from jetcheck.verdict import EXIT_CONFORMS, EXIT_MUST_FAILED, OUT_OF_PROFILE

from .proofs import broken_proxy, certify_run

NOT_A_RELEASE = "which is no nats-server release with JetStream"
# a rule of 2.2.0, one of 2.10.0, and one whose error text changed in 2.10.0 (the check expects the profile's)
CHECKS = (
    "test_puback_names_the_stream_and_the_next_sequence or test_update_between_limits_and_interest_is_accepted or "
    "test_update_to_or_from_workqueue_is_rejected_with_10052"
)
RULES = {
    "publish.puback-fields",
    "streams.update-retention-limits-interest",
    "streams.update-retention-workqueue-rejected",
}


@pytest.mark.parametrize(
    ("version", "api_level", "why"),
    [
        ("0.0.0", 0, f"the server reports '0.0.0', {NOT_A_RELEASE}"),
        ("", 0, f"the server reports no version, {NOT_A_RELEASE}"),
        ("1.4.1", 0, f"the server reports '1.4.1', {NOT_A_RELEASE}"),
        ("acme-7", 0, f"the server reports 'acme-7', {NOT_A_RELEASE}"),
        ("2.9.0", 1, "the server reports 2.9.0 but JetStream API level 1, which nats-server has from 2.11.0"),
    ],
)
def test_a_version_that_names_no_release_holds_the_target_to_every_rule(version, api_level, why):
    """A target that reports no release, another product's numbers, or a release its API level belies gets every
    rule, and expects the newest release's behaviour."""
    profile = profile_for("auto", version, api_level)
    assert (profile.name, profile.why, profile.behaviour) == ("latest", f"every rule: {why}", DEFAULT_VERSION)
    assert profile.holds("2.10.14") and profile.holds("9.0.0")


def test_a_real_release_is_held_to_its_own_rules_and_behaviour():
    """A server reporting 2.10.14 is held to the rules nats-server 2.10.14 has, and expects its behaviour."""
    profile = profile_for("auto", "2.10.14", 0)
    assert (profile.name, profile.behaviour) == ("2.10.14", "2.10.14")
    assert profile.holds("2.10.14") and not profile.holds("2.10.15") and not profile.holds("2.11.0")
    assert profile.na_reason("x.y", "2.11.0").startswith(OUT_OF_PROFILE + " 2.10.14: ")


def test_a_profile_asked_for_overrides_the_version_reported():
    """--rules-of names the profile whatever the server says: a release line holds every release of it."""
    line = profile_for("2.10", "0.0.0", 0)
    assert (line.name, line.why, line.behaviour) == ("2.10", "as asked", "2.10.0")
    assert line.holds("2.10.14") and not line.holds("2.11.0")
    assert profile_for("2.10", "2.10.14", 0).behaviour == "2.10.14"  # the server's own release, in the line
    everything = profile_for("latest", "2.2.0", 0)
    assert (everything.name, everything.behaviour) == ("latest", "2.2.0") and everything.holds("2.10.14")


def _certified(embedded_server, tmp_path, disguise: str, *options: str, checks: str = CHECKS):
    with broken_proxy(embedded_server.url, (disguise,)) as url:
        code, results, output = certify_run(url, tmp_path / "out", "-k", checks, options=options)
    run = json.loads((tmp_path / "out" / RUN_FILE).read_text())
    return code, {r.id: r for r in results}, run, output


@pytest.mark.parametrize("disguise", ["info-version-zero", "info-version-none"])
def test_a_server_that_hides_its_version_is_checked_against_every_rule(embedded_server, tmp_path, disguise):
    """nats-server behind a proxy that rewrites INFO's version to 0.0.0 (or drops it) is held to every rule: each
    check runs and passes on its behaviour, none is excused as `na`, and the verdict names the profile."""
    code, results, run, output = _certified(embedded_server, tmp_path, disguise)
    assert {rule: r.status for rule, r in results.items()} == dict.fromkeys(RULES, "pass"), output
    assert run["profile"]["name"] == "latest" and NOT_A_RELEASE in run["profile"]["why"]
    assert f"held to profile latest (every rule: the server reports '0.0.0', {NOT_A_RELEASE})" in output
    assert code == EXIT_CONFORMS


def test_a_profile_asked_for_leaves_newer_rules_out_and_says_so(embedded_server, tmp_path):
    """--rules-of 2.9 through the disguise: the 2.10 rule is `na`, "not in profile 2.9", and counted apart."""
    checks = CHECKS.rsplit(" or ", 1)[0]  # a profile's own behaviour is 2.9's: leave out the check whose text varies
    code, results, run, output = _certified(
        embedded_server, tmp_path, "info-version-zero", "--rules-of", "2.9", checks=checks
    )
    newer = results.pop("streams.update-retention-limits-interest")
    assert (newer.status, newer.message.split(":")[0]) == ("na", f"{OUT_OF_PROFILE} 2.9")
    assert {r.status for r in results.values()} == {"pass"}, output
    assert "(1 not in profile)" in output and run["profile"]["why"] == "as asked"
    assert code == EXIT_CONFORMS


def test_a_disguised_server_that_breaks_a_rule_still_fails_it(embedded_server, tmp_path):
    """A hidden version excuses nothing: through info-version-zero and strip-msg-id, dedup fails."""
    with broken_proxy(embedded_server.url, ("info-version-zero", "strip-msg-id")) as url:
        code, results, output = certify_run(
            url, tmp_path / "out", "-k", "test_repeated_msg_id_is_acked_as_duplicate_of_the_original"
        )
    assert [(r.id, r.status) for r in results] == [("dedup.duplicate-acked", "fail")], output
    assert code == EXIT_MUST_FAILED
