"""Which rules a certification holds a target to: a profile, the documented rules of one nats-server release.

A rule is in the profile of release R when R has it (the rule's `since` is R or older); "latest" holds every rule.
A profile is named by the user (`--rules-of 2.10`, a release or a release line) or taken from the target: the
release its INFO reports, but only when that is a nats-server release with JetStream (2.2.0 on) and the JetStream
API level it advertises (ADR-44: levels begin with 2.11.0) does not contradict it. A target that reports no
version, 0.0.0, another product's numbering or a release its API level belies is held to every rule: a version
string can narrow a certificate to a real release's rules, never empty it. The verdict names the profile.

Where a documented behaviour changed between releases, a check expects that of the profile's `behaviour` release:
the release the server reports when it is a real one in the profile, else the profile's own (the newest release
jetcheck knows, DEFAULT_VERSION, for every rule), never what an unknown version string would imply.
"""

from __future__ import annotations

from dataclasses import dataclass

from jetcheck.specs import DEFAULT_VERSION
from jetcheck.verdict import OUT_OF_PROFILE
from jetcheck.versions import InvalidVersion, parse_version

AUTO = "auto"
LATEST = "latest"
FIRST_JETSTREAM_RELEASE = "2.2.0"
FIRST_API_LEVEL_RELEASE = "2.11.0"  # ADR-44: the first release with $JS.API.INFO's api.level (1)


@dataclass(frozen=True)
class Profile:
    """The release whose rules a run certifies ("" for every rule) and why that one."""

    release: str  # "2.10.14", "2.10" (a release line: all of it) or "" (latest: every rule)
    why: str
    behaviour: str  # the release whose version-dependent behaviour the checks expect

    @property
    def name(self) -> str:
        return self.release or LATEST

    def holds(self, since: str) -> bool:
        """Whether a rule that nats-server has from `since` is in this profile."""
        if not self.release:
            return True
        have, need = parse_version(self.release), parse_version(since)
        if len(self.release.split(".")) == 2:  # a release line: every release of it
            return need.release[:2] <= have.release[:2]
        return need <= have

    def describe(self) -> str:
        """The profile as the verdict names it, e.g. "profile 2.10.14 (the release the server reports)"."""
        return f"profile {self.name} ({self.why})"

    def na_reason(self, rule_id: str, since: str) -> str:
        return f"{OUT_OF_PROFILE} {self.name}: {rule_id} is a rule of nats-server {since} and later"

    def as_dict(self) -> dict[str, str]:
        return {"name": self.name, "release": self.release, "why": self.why, "behaviour": self.behaviour}


def profile_for(asked: str, reported_version: str, api_level: int) -> Profile:
    """The profile of a run: the one `asked` for (--rules-of: auto, latest or a release), or for auto the one the
    target's reported version and JetStream API level support (see the module's docstring)."""
    not_a_release = _not_a_release(reported_version, api_level)
    reported = "" if not_a_release else reported_version  # a real release, or ""
    if asked == LATEST:
        return Profile("", "every rule, as asked", reported or DEFAULT_VERSION)
    if asked != AUTO:
        in_profile = reported and (reported == asked or reported.startswith(asked + "."))
        return Profile(asked, "as asked", reported if in_profile else asked if asked.count(".") == 2 else asked + ".0")
    if not_a_release:
        return Profile("", f"every rule: {not_a_release}", DEFAULT_VERSION)
    return Profile(reported, "the release the server reports", reported)


def _not_a_release(version: str, api_level: int) -> str:
    """Why `version` is not a nats-server release with JetStream that the API level agrees with; "" when it is."""
    try:
        parsed = parse_version(version)
    except InvalidVersion:
        parsed = None
    if parsed is None or version.split("-")[0].count(".") != 2 or parsed < parse_version(FIRST_JETSTREAM_RELEASE):
        shown = f"'{version}'" if version else "no version"
        return f"the server reports {shown}, which is no nats-server release with JetStream"
    if api_level > 0 and parsed < parse_version(FIRST_API_LEVEL_RELEASE):
        return (
            f"the server reports {version} but JetStream API level {api_level}, which nats-server has from "
            f"{FIRST_API_LEVEL_RELEASE}"
        )
    return ""
