"""`jetcheck bisect`: the releases of a client between which a rule's status changes, found by certifying as few
releases as a binary search needs.

Releases come from the client's registry, oldest first, from the first with the API jetcheck drives (nats-py 2.2.0
on PyPI; nats.go v1.26.0, its first `jetstream` package, on the Go module proxy; @nats-io/jetstream 3.0.0 on npm).
Certifying a release runs the client checks of the asked rules' areas against one nats-server release; the rule
statuses it gives are cached per (client, release, server release, rule) under jetcheck's cache, keyed by the
suite's own sources, so a second bisect, or one of another rule of those areas, certifies only what it has not seen.
A release that cannot be certified (its driver does not build, its certify did not finish) reads `unavailable`,
with what went wrong, and is not cached.

A status that changes and changes back between two releases that agree is not seen: an interval whose two ends give
a rule the same status is taken as unchanged for it (git bisect assumes the same). A change found is looked at once
more: both its releases are certified a second time, and two certifies of one release that disagree make its status
`unstable` (a client's race, or a flaky check), not a change between releases.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from jetcheck.conformance.catalog import Rule, load_catalog
from jetcheck.conformance.clients.build import cache_root, source_digest
from jetcheck.errors import ConfigError
from jetcheck.fixtures import children
from jetcheck.records import RESULTS_FILE, CheckResult, read_results
from jetcheck.verdict import COMPLETED_EXITS, rule_statuses
from jetcheck.versions import InvalidVersion, parse_version

UNAVAILABLE = "unavailable"
UNSTABLE = "unstable"
REGISTRY_TIMEOUT_S = 60
SUITE = Path(__file__).parent  # its sources key the cache: changed checks or adapters are certified anew
SUITE_FILES = (".py", ".toml", ".go", ".mod", ".sum", ".mjs", ".json")


@dataclass(frozen=True)
class Release:
    version: str
    date: str  # YYYY-MM-DD, as the registry gives it


@dataclass(frozen=True)
class Seen:
    """One rule's status in one release, and what its checks said (the first that did not pass); `runs`: the status
    of each certify of the release so far (two that disagree make the status `unstable`)."""

    status: str
    message: str = ""
    runs: tuple[str, ...] = ()

    def again(self, later: Seen) -> Seen:
        """This and a later certify's status of the same rule in the same release, as one."""
        runs = (*self.runs, *later.runs)
        if len(set(runs)) == 1:
            return Seen(self.status, self.message or later.message, runs)
        said = "; ".join(m for m in (self.message, later.message) if m)
        return Seen(UNSTABLE, f"{', then '.join(runs)} on certifying the same release again: {said}", runs)


@dataclass(frozen=True)
class Change:
    rule: str
    before: Release
    was: Seen
    after: Release
    now: Seen


# `jetcheck bisect --help`
DESCRIPTION = (
    "Certify releases of --client (PyPI, the Go module proxy or npm lists them) against one "
    "nats-server release, as few as a binary search needs, and print each rule whose status changes: the last "
    "release with the old status, the first with the new one, their dates and what the checks said. Results "
    "are cached per client, release, server release and rule."
)


# --- releases ----------------------------------------------------------------------------------------------------


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=REGISTRY_TIMEOUT_S) as response:
            return response.read()
    except OSError as exc:
        raise ConfigError(f"could not list releases from {url}: {exc}") from None


def _fetch_json(url: str) -> object:
    try:
        return json.loads(_fetch(url))
    except ValueError as exc:
        raise ConfigError(f"could not list releases from {url}: {exc}") from None


def _fetch_lines(url: str) -> list[str]:
    return _fetch(url).decode().split()


def _natspy_releases() -> list[Release]:
    listed = _fetch_json("https://pypi.org/pypi/nats-py/json")["releases"]
    return [Release(v, files[0]["upload_time"][:10]) for v, files in listed.items() if files]


GO_PROXY = "https://proxy.golang.org/github.com/nats-io/nats.go/@v"


def _natsgo_releases() -> list[Release]:
    found = []
    for version in _fetch_lines(f"{GO_PROXY}/list"):
        if _final(version) and parse_version(version) >= FIRST["nats.go"]:
            found.append(Release(version, _fetch_json(f"{GO_PROXY}/{version}.info")["Time"][:10]))
    return found


def _natsjs_releases() -> list[Release]:
    times = _fetch_json("https://registry.npmjs.org/@nats-io%2fjetstream")["time"]
    return [Release(v, when[:10]) for v, when in times.items() if v not in ("created", "modified")]


LISTS: dict[str, Callable[[], list[Release]]] = {
    "nats-py": _natspy_releases,
    "nats.go": _natsgo_releases,
    "nats.js": _natsjs_releases,
}
FIRST = {"nats-py": parse_version("2.2.0"), "nats.go": parse_version("1.26.0"), "nats.js": parse_version("3.0.0")}


def _final(version: str) -> bool:
    try:
        return not parse_version(version).is_prerelease
    except InvalidVersion:
        return False


def releases(client: str, between: str = "") -> list[Release]:
    """The client's final releases from its first with the API jetcheck drives, oldest first; `between` ("A..B",
    either end may be left out) keeps those from A to B."""
    listed = [r for r in LISTS[client]() if _final(r.version) and parse_version(r.version) >= FIRST[client]]
    listed.sort(key=lambda r: parse_version(r.version))
    low, _, high = between.partition("..")
    if low:
        listed = [r for r in listed if parse_version(r.version) >= parse_version(low)]
    if high:
        listed = [r for r in listed if parse_version(r.version) <= parse_version(high)]
    if len(listed) < 2:
        raise ConfigError(f"{client} has {len(listed)} release(s) in {between or 'its history'}: nothing to bisect")
    return listed


# --- the search --------------------------------------------------------------------------------------------------


def changes(
    ordered: list[Release], seen_in: Callable[[Release], Mapping[str, Seen]], rules: Iterable[str]
) -> list[Change]:
    """Each rule's status changes between adjacent releases of `ordered`, looking only inside intervals whose ends
    disagree; `seen_in(release)` certifies a release (once: callers cache it)."""
    found: list[Change] = []
    stack = [(0, len(ordered) - 1, set(rules))]
    while stack:
        low, high, asked = stack.pop()
        before, after = seen_in(ordered[low]), seen_in(ordered[high])
        differ = {rule for rule in asked if _seen(before, rule).status != _seen(after, rule).status}
        if not differ:
            continue
        if high == low + 1:
            for rule in sorted(differ):
                found.append(Change(rule, ordered[low], _seen(before, rule), ordered[high], _seen(after, rule)))
            continue
        middle = (low + high) // 2
        stack += [(middle, high, differ), (low, middle, differ)]  # the older half first
    return sorted(found, key=lambda c: (c.rule, parse_version(c.before.version)))


def _seen(statuses: Mapping[str, Seen], rule: str) -> Seen:
    return statuses.get(rule, Seen("not run", "the release's certify did not run this rule's checks"))


# --- certifying a release, cached --------------------------------------------------------------------------------


def suite_digest() -> str:
    """A short digest of the suite's sources (checks, catalog, adapters, drivers): what makes a cached status stale."""
    return source_digest(SUITE, SUITE_FILES)


def bisect_cache() -> Path:
    """Beside the driver builds: `~/.cache/jetcheck/bisect` (XDG_CACHE_HOME honoured)."""
    return cache_root().parent / "bisect"


class ReleaseResults:
    """Rule statuses per release of one client against one server release: from the cache, else from a certify of
    the release (its result set kept in `out`/<release>/); confirm() certifies a release once more."""

    def __init__(self, client: str, server_version: str, areas: list[str], out: Path, cache: Path | None = None):
        self.client, self.server_version, self.areas, self.out = client, server_version, areas, out
        self.folder = (cache or bisect_cache()) / client / f"nats-server-{server_version}"
        self.suite = suite_digest()
        self.certified: list[str] = []  # each certify this bisect ran, by release (a confirmation repeats one)
        self.cached: set[str] = set()  # releases whose statuses came from the cache
        self._known: dict[str, dict[str, Seen]] = {}

    def __call__(self, release: Release) -> dict[str, Seen]:
        if release.version not in self._known:
            cached = self._cached(release)
            if cached is not None:
                self.cached.add(release.version)
            else:
                cached = self._certify(release, self.out / release.version)
                self._store(release, cached)
            self._known[release.version] = cached
        return self._known[release.version]

    def confirm(self, release: Release, rule: str) -> Seen:
        """`rule`'s status in `release` from two certifies at least: a change found once is looked at again."""
        seen = _seen(self(release), rule)
        if len(seen.runs) < 2 and seen.status != UNAVAILABLE:
            again = self._certify(release, self.out / f"{release.version}-again")
            known = self._known[release.version]
            merged = {r: known[r].again(again[r]) if r in known and r in again else again.get(r, known.get(r))
                      for r in {*known, *again}}  # fmt: skip
            self._known[release.version] = merged
            self._store(release, merged)
        return _seen(self._known[release.version], rule)

    def _cache_file(self, release: Release) -> Path:
        return self.folder / f"{release.version}.json"

    def _cached(self, release: Release) -> dict[str, Seen] | None:
        stored = self._cached_any(release)
        if not stored or not set(self.areas) <= set(stored.get("areas", [])):
            return None
        return {
            rule: Seen(seen["status"], seen["message"], tuple(seen["runs"])) for rule, seen in stored["rules"].items()
        }

    def _certify(self, release: Release, folder: Path) -> dict[str, Seen]:
        selection = " or ".join(self.areas)
        command = [
            sys.executable, "-m", "jetcheck.cli", "certify",
            "--client", f"{self.client}@{release.version}",
            "--server-version", self.server_version,
            "--out", str(folder),
            "--", "-m", f"({selection}) and client",
        ]  # fmt: skip
        again = " again, to confirm a change" if release.version in self.certified else ""
        print(f"jetcheck: certifying {self.client} {release.version} ({release.date}){again}", flush=True)
        with certify_log(folder) as log:
            status = children.run(command, stdout=log, stderr=subprocess.STDOUT)
        self.certified.append(release.version)
        results_path = folder / RESULTS_FILE
        if status not in COMPLETED_EXITS or not results_path.exists():
            said = _last_line(folder / CERTIFY_LOG) or f"certify exited {status}"
            return {rule: Seen(UNAVAILABLE, said) for rule in self._rules_of_areas()}
        return _rule_results(list(read_results(results_path)))

    def _rules_of_areas(self) -> list[str]:
        return [rule.id for rule in load_catalog().values() if rule.area in self.areas and rule.subject == "client"]

    def _store(self, release: Release, seen: dict[str, Seen]) -> None:
        """Keep what a certify gave (never `unavailable`: a driver that did not build may build tomorrow)."""
        if any(s.status == UNAVAILABLE for s in seen.values()):
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        previous = self._cached_any(release)
        areas = sorted(set(self.areas) | set(previous.get("areas", [])))
        rules = {**previous.get("rules", {}), **{rule: vars(s) for rule, s in seen.items()}}
        stored = {"client": self.client, "release": release.version, "date": release.date, "suite": self.suite}
        temporary = self._cache_file(release).with_suffix(".tmp")
        temporary.write_text(json.dumps({**stored, "areas": areas, "rules": rules}, indent=1), encoding="utf-8")
        temporary.replace(self._cache_file(release))

    def _cached_any(self, release: Release) -> dict:
        """The cache file's contents when they are of this suite (other areas of the release), else nothing."""
        try:
            stored = json.loads(self._cache_file(release).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return stored if stored.get("suite") == self.suite else {}


CERTIFY_LOG = "certify.log"


def certify_log(folder: Path):
    """certify's own output goes to `folder`/certify.log: the bisect prints one line per release."""
    folder.mkdir(parents=True, exist_ok=True)
    return (folder / CERTIFY_LOG).open("w", encoding="utf-8")


def _last_line(path: Path) -> str:
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except OSError:
        return ""
    said = [line for line in lines if line.startswith("jetcheck:")]
    return (said or lines or [""])[-1]


def _rule_results(results: list[CheckResult]) -> dict[str, Seen]:
    statuses = rule_statuses(results)
    said: dict[str, str] = {}
    for result in results:
        if result.status != "pass" and result.id not in said:
            said[result.id] = result.message.strip().splitlines()[0] if result.message.strip() else ""
    return {rule: Seen(status, said.get(rule, ""), (status,)) for rule, status in statuses.items()}


# --- the command -------------------------------------------------------------------------------------------------


def asked_rules(client: str, rule_ids: list[str] | None) -> list[Rule]:
    """The client rules to bisect: those named, or every client rule; a server rule is refused."""
    catalog = load_catalog()
    if not rule_ids:
        return [rule for rule in catalog.values() if rule.subject == "client"]
    unknown = [rule for rule in rule_ids if rule not in catalog]
    if unknown:
        raise ConfigError(f"no such rule: {', '.join(unknown)}")
    server = [rule for rule in rule_ids if catalog[rule].subject != "client"]
    if server:
        raise ConfigError(f"{', '.join(server)}: a server rule; a bisect over {client} releases judges client rules")
    return [catalog[rule] for rule in rule_ids]


def validate(args: argparse.Namespace) -> list[Rule]:
    if args.client.release or args.client.variants:
        raise ConfigError(f"bisect picks the releases: --client without @release or +variant, not {args.client}")
    return asked_rules(args.client, args.rule)


def table(found: list[Change]) -> list[str]:
    lines = ["rule | last release with the old status | first release with the new status | what the checks said"]
    for change in found:
        said = [f"{release.version}: {seen.message}" for release, seen in ((change.after, change.now),
                (change.before, change.was)) if seen.message]  # fmt: skip
        lines.append(
            f"{change.rule} | {change.before.version} ({change.before.date}): {change.was.status} | "
            f"{change.after.version} ({change.after.date}): {change.now.status} | {'; '.join(said) or '-'}"
        )
    return lines


def run(args: argparse.Namespace) -> int:
    rules = validate(args)
    ordered = releases(args.client, args.releases or "")
    areas = sorted({rule.area for rule in rules})
    results = ReleaseResults(args.client, args.server_version, areas, Path(args.out))
    print(
        f"jetcheck: bisecting {len(rules)} rule(s) over {len(ordered)} {args.client} releases "
        f"({ordered[0].version} .. {ordered[-1].version}) against nats-server {args.server_version}",
        flush=True,
    )
    found = [
        Change(c.rule, c.before, results.confirm(c.before, c.rule), c.after, results.confirm(c.after, c.rule))
        for c in changes(ordered, results, [rule.id for rule in rules])
    ]
    ends = [results(ordered[0]), results(ordered[-1])]
    print(f"\n{len(results.certified)} certify run(s) now ({len(set(results.certified))} releases), "
          f"{len(results.cached)} release(s) from the cache")  # fmt: skip
    if not found:
        print("no rule changes status between these releases (as far as intervals whose ends agree can tell)")
    for line in table(found):
        print(line)
    if any(UNSTABLE in (c.was.status, c.now.status) for c in found):
        print(f"{UNSTABLE}: two certifies of the same release disagreed (a race in the client, or a flaky check): "
              "no change between releases can be told from it")  # fmt: skip
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "bisect.json").write_text(
        json.dumps([_as_json(change) for change in found], indent=1), encoding="utf-8"
    )
    unavailable = any(seen.status == UNAVAILABLE for end in ends for seen in end.values())
    return 2 if unavailable and not found else 0


def _as_json(change: Change) -> dict:
    return {
        "rule": change.rule,
        "before": {**vars(change.before), **vars(change.was)},
        "after": {**vars(change.after), **vars(change.now)},
    }
