"""The report's "Client rules by release": one grid per client, rules down and releases across, areas folded."""

from __future__ import annotations

import pandas as pd

from jetcheck.records import CheckResult
from jetcheck.reports.client_releases import client_release_grids
from jetcheck.reports.conformance_report import ConformanceTables, _matrix, _summary, results_frame
from jetcheck.reports.render import ReportContent, render_html

CLIENTS = ("nats-py", "nats.go", "nats.js", "async-nats", "jnats")
RELEASES = [f"1.{minor}.0" for minor in (2, 10, 3, 4, 5, 6, 7, 8, 9, 11)]  # unsorted on purpose: 1.10 after 1.9


def result(client: str, release: str, rule: str, status: str, area: str = "kv") -> CheckResult:
    return CheckResult(
        id=rule, status=status, area=area, title=f"{rule} as a sentence", level="MUST", source="ADR-8",
        min_version="2.2.0", server_version="2.15.1", client={"name": client, "version": release},
        duration_s=0.1, message=f"{client} {release} said so", subject="client",
    )  # fmt: skip


def fifty_result_sets() -> pd.DataFrame:
    """5 clients x 10 releases: kv.changes fails until 1.5.0, kv.same always passes, ordered.x na then pass."""
    frames = []
    for client in CLIENTS:
        for release in RELEASES:
            minor = int(release.split(".")[1])
            rows = [
                result(client, release, "kv.changes", "fail" if minor < 5 else "pass"),
                result(client, release, "kv.same", "pass"),
                result(client, release, "ordered.x", "na" if minor < 8 else "pass", area="ordered"),
                CheckResult(**{**result(client, release, "dedup.s", "pass", "dedup").__dict__, "subject": "server"}),
            ]
            frames.append(results_frame(f"{client}-{release}", rows))
    return pd.concat(frames, ignore_index=True)


def test_each_client_is_a_grid_of_its_releases_oldest_first_with_changing_rules_marked():
    grids = client_release_grids(fifty_result_sets())
    assert [g["name"] for g in grids] == sorted(CLIENTS)
    go = next(g for g in grids if g["name"] == "nats.go")
    assert go["columns"] == sorted(RELEASES, key=lambda r: int(r.split(".")[1]))  # 1.2 ... 1.11, not 1.10 < 1.2
    assert go["rules"] == 3, "server rules are the server's: not in a client's grid"
    kv = next(a for a in go["areas"] if a["area"] == "kv")
    changes = next(r for r in kv["rows"] if r["id"] == "kv.changes")
    assert [c["status"] for c in changes["cells"]] == ["fail"] * 3 + ["pass"] * 7
    assert changes["changed"] and not next(r for r in kv["rows"] if r["id"] == "kv.same")["changed"]
    assert changes["cells"][0]["message"] == "nats.go 1.2.0 said so"
    assert go["counts"][0] == "1 / 1 / 1" and go["counts"][-1] == "3 / 0 / 0"  # pass / fail / na per release
    assert go["changed"] == 2 and [a["area"] for a in go["areas"]] == ["kv", "ordered"]
    newest = fifty_result_sets()
    newest = newest[newest["client"].str.endswith(" 1.11.0")]
    (one,) = [g for g in client_release_grids(newest) if g["name"] == "jnats"]
    assert [(a["area"], a["open"]) for a in one["areas"]] == [("kv", False), ("ordered", False)]
    oldest = fifty_result_sets()
    (first,) = [g for g in client_release_grids(oldest[oldest["client"] == "jnats 1.2.0"])]
    assert [(a["area"], a["open"]) for a in first["areas"]] == [("kv", True), ("ordered", False)], (
        "with one release, the areas with a failing rule open"
    )


def test_the_html_folds_each_client_and_area_and_the_flat_matrix_when_it_is_wide():
    results = fifty_result_sets()
    failing = results[results["status"] == "fail"]
    tables = ConformanceTables(results, _summary(results), failing, results[results["status"] == "na"],
                               _matrix(results))  # fmt: skip
    html = render_html(ReportContent(inputs=["fifty"], conformance=tables, loads=[]))
    section = html[html.index('<section id="client-releases">') :]
    section = section[: section.index("</section>")]
    assert section.count('<details class="client-grid"') == 5
    assert section.count('<details class="area" open>') == 10  # kv and ordered change in every client
    assert "nats.go: 10 releases, 3 client rules, 2 with a status that changes" in section
    assert 'title="fail: jnats 1.2.0 said so">F</td>' in section
    assert "Compatibility matrix, flat" in html and "<summary>Compatibility matrix, flat" in html
