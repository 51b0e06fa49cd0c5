"""The HTML report reads as a certification document: sections in order, no data dumps, charts a reader can read."""

from __future__ import annotations

import copy
import dataclasses
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jetcheck.records import CheckResult
from jetcheck.reports import charts
from jetcheck.reports.conformance_report import aggregate_conformance
from jetcheck.reports.inputs import resolve_all
from jetcheck.reports.render import ReportContent, render_html, render_markdown
from jetcheck.testing.synthetic import sample_results, write_certify_run

SECTIONS = ["verdict", "tested", "areas", "failures", "load"]


class _Page(HTMLParser):
    """The parts of a page the tests look at: section ids in order, headings, table cells, table ids."""

    def __init__(self):
        super().__init__()
        self.section_ids: list[str] = []
        self.headings: list[str] = []
        self.cells: list[tuple[str | None, str]] = []  # (id of the enclosing table, cell text)
        self.details: list[str] = []
        self._table: list[str | None] = []
        self._open: list[str] = []
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section" and attrs.get("id"):
            self.section_ids.append(attrs["id"])
        if tag == "table":
            self._table.append(attrs.get("id"))
        if tag in ("td", "h1", "h2", "h3", "h4", "details"):
            self._open.append(tag)
            self._text.append("")

    def handle_endtag(self, tag):
        if tag == "table" and self._table:
            self._table.pop()
        if self._open and tag == self._open[-1]:
            self._open.pop()
            text = " ".join(self._text.pop().split())
            if tag == "td":
                self.cells.append((self._table[-1] if self._table else None, text))
            elif tag == "details":
                self.details.append(text)
            else:
                self.headings.append(text)
            if self._text:
                self._text[-1] += " " + text

    def handle_data(self, data):
        if self._text:
            self._text[-1] += data


def page(html: str) -> _Page:
    parser = _Page()
    parser.feed(html)
    return parser


@pytest.fixture
def captured_figures(monkeypatch):
    """The matplotlib figures the charts module draws, kept open for inspection instead of encoded."""
    figures = []

    def keep(figure) -> str:
        figures.append(figure)
        return "data:image/png;base64,"

    monkeypatch.setattr(charts, "_data_uri", keep)
    yield figures
    for figure in figures:
        charts.plt.close(figure)


def _title(axis) -> str:
    """A plot's title wherever it is placed (the charts put theirs on the left)."""
    return " ".join(filter(None, (axis.get_title(loc) for loc in ("left", "center", "right"))))


def _conformance(tmp_path: Path, results: list[CheckResult], name: str = "run-a"):
    return aggregate_conformance(resolve_all([str(write_certify_run(tmp_path / name, results))]))


def _verdict(html: str) -> tuple[str, list[tuple[str, str]]]:
    """The verdict section's outcome class and its (class, sentence) items."""
    block = re.search(r'<section id="verdict" class="verdict (\w+)">(.*?)</section>', html, re.S)
    assert block, "no verdict section"
    return block.group(1), re.findall(r'<li class="(\w+)">(.*?)</li>', block.group(2))


def test_verdict_is_green_only_when_every_subject_conforms(tmp_path):
    """A passing run is green; a client failure is red and said apart from the conforming server."""
    passing = _conformance(tmp_path, sample_results(failing=()), "passing")
    outcome, items = _verdict(render_html(ReportContent(["x"], passing, [])))
    assert outcome == "pass" and [kind for kind, _ in items] == ["conforms"]
    client_fails = [
        dataclasses.replace(r, subject="client", status="fail", message="expected x; actual y")
        if r.id == "publish.rule-02"
        else r
        for r in sample_results(failing=())
    ]
    html = render_html(ReportContent(["x"], _conformance(tmp_path, client_fails, "client"), []))
    outcome, items = _verdict(html)
    assert outcome == "fail"
    assert items[0][0] == "conforms" and items[0][1].startswith("server 2.15.1: conforms")
    assert items[1] == ("fails", "client nats-py 2.16.0: 1 MUST client rule fails, 0/1 client rules pass")


def test_incomplete_run_is_marked_and_never_green(tmp_path):
    """A result set whose run did not finish says INCOMPLETE and why, in the HTML and in summary.md."""
    folder = write_certify_run(tmp_path / "cut", sample_results(failing=())[:10])
    run = json.loads((folder / "run.json").read_text())
    del run["finished_at"]
    run["collected"] = 24
    (folder / "run.json").write_text(json.dumps(run))
    content = ReportContent(["x"], aggregate_conformance(resolve_all([str(folder)])), [])
    html = render_html(content)
    outcome, _ = _verdict(html)
    assert outcome == "incomplete"
    assert '<p class="headline">INCOMPLETE</p>' in html
    assert "INCOMPLETE: 10 of 24 checks ran" in html
    assert "**INCOMPLETE**" in render_markdown(content)


def test_the_verdict_names_the_profile_and_each_must_rule_that_did_not_run(tmp_path):
    """The first screen says which profile the run held the server to, and lists every MUST rule of it that did not
    run with its reason, in the HTML and in summary.md."""
    results = sample_results(failing=())
    must = next(r for r in results if r.level == "MUST" and r.status == "pass")
    skipped = dataclasses.replace(must, status="skip", message="needs a clustered target")
    profile = {"name": "latest", "why": "every rule: the server reports '0.0.0', which is no nats-server release"}
    results = [skipped if r is must else r for r in results]
    folder = write_certify_run(tmp_path / "disguised", results, profile=profile)
    content = ReportContent(["x"], aggregate_conformance(resolve_all([str(folder)])), [])
    line = f"not run: MUST server rule {skipped.id} ({skipped.check}): needs a clustered target"
    held = f"held to profile latest ({profile['why']})"
    block = html.unescape(re.search(r'<section id="verdict".*?</section>', render_html(content), re.S).group(0))
    assert f'<p class="profile">{held}</p>' in block and f"<li>{line}</li>" in block
    markdown = render_markdown(content)
    assert f"- {held}\n" in markdown and f"- {line}\n" in markdown


def test_sections_follow_the_certificate_order(built_report):
    """Verdict, what was tested, per-area results, failures, then load: in the HTML and in summary.md."""
    html = built_report.index.read_text(encoding="utf-8")
    assert page(html).section_ids[: len(SECTIONS)] == SECTIONS
    summary = (built_report.index.parent / "summary.md").read_text(encoding="utf-8")
    headings = [line[3:] for line in summary.splitlines() if line.startswith("## ")]
    assert headings[:4] == ["What was tested", "Results by area", "Failures", "Load"]
    assert summary.index("**") < summary.index("## What was tested")  # the verdict comes first


def test_table_rows_do_not_repeat_the_run_name(built_report, run_folder):
    """With one result set its name is said once, in a heading, and no table cell repeats it."""
    found = page(built_report.index.read_text(encoding="utf-8"))
    assert [text for _, text in found.cells if text == run_folder.name] == []
    assert any(run_folder.name in heading for heading in found.headings)


def test_several_result_sets_keep_their_name_column(tmp_path):
    """With two result sets each row says which one it belongs to."""
    first = write_certify_run(tmp_path / "2.14", sample_results(server_version="2.14.0"))
    second = write_certify_run(tmp_path / "2.15", sample_results(server_version="2.15.1"))
    content = ReportContent(
        [str(first), str(second)], aggregate_conformance(resolve_all([str(first), str(second)])), []
    )
    cells = [text for table, text in page(render_html(content)).cells if table == "failures"]
    assert "2.14" in cells and "2.15" in cells


def test_load_settings_are_a_readable_table(built_report):
    """No nanosecond timestamps, no nested JSON, no per-process keys: times as dates, durations in seconds."""
    html = built_report.index.read_text(encoding="utf-8")
    assert re.findall(r"\d{19}", html) == []
    cells = [text for table, text in page(html).cells if table == "settings"]
    settings = dict(zip(cells[0::2], cells[1::2], strict=True))
    assert settings, "no settings table"
    assert [value for value in settings.values() if value.startswith(("{", "["))] == []
    assert [name for name in settings if re.search(r"\d{3,}", name)] == []  # no pid-keyed rows
    assert settings["started"] == "2025-10-09 08:53:20 UTC"  # synthetic START_NS
    assert settings["duration"] == "8 s"
    assert settings["process roles"] == "2 processes: 2 consumer + publisher"


def test_per_process_figures_are_summarised():
    """A per-pid mapping (load CPU seconds) becomes one line: total, process count and the busiest process."""
    from jetcheck.reports.load_settings import load_settings

    rows = dict(
        load_settings({"load_cpu_s": {"101": 4.9, "102": 8.6, "103": 0.05}, "end_ns": 1_795_425_639_342_517_334})
    )
    assert rows["load CPU"] == "13.6 s over 3 processes (at most 8.6 s, pid 102)"
    assert rows["ended"] == "2026-11-23 09:20:39 UTC"


def test_percentile_axis_ends_at_the_sample_count(load_tables, captured_figures):
    """The percentile axis stops at 1 - 1/n for n samples: no 99.9999% drawn for a few thousand samples."""
    charts.distribution(load_tables)
    samples = int(load_tables.latency[load_tables.latency["metric"] == "response"]["count"].max())
    for axis in (axis for figure in captured_figures for axis in figure.axes):
        assert axis.get_xlim()[1] <= samples * 1.05
        visible = [tick for tick in axis.get_xticks() if tick <= axis.get_xlim()[1]]
        assert max(visible) <= samples
        for line in axis.lines:
            assert max(line.get_xdata()) <= samples


def test_charts_have_few_series_and_legends_outside_the_data(load_tables, captured_figures):
    """Each plot has at most four series and its legend does not overlap the plotting area."""
    charts.timeline(load_tables)
    charts.distribution(load_tables)
    assert captured_figures
    for figure in captured_figures:
        figure.canvas.draw()
        for axis in figure.axes:
            assert len(axis.lines) <= 4, _title(axis)
            legend = axis.get_legend()
            if legend is not None:
                assert not legend.get_window_extent().overlaps(axis.get_window_extent()), _title(axis)


def test_no_errors_chart_when_there_were_no_errors(load_tables, captured_figures):
    """A run without errors gets the words "no errors", not an empty chart."""
    clean = dataclasses.replace(
        load_tables,
        errors=load_tables.errors.iloc[0:0],
        throughput=load_tables.throughput.assign(errors=0, ok=load_tables.throughput["ops"]),
        totals=load_tables.totals.assign(errors=0, ok=load_tables.totals["ops"]),
    )
    charts.timeline(clean)
    titles = [_title(axis).lower() for figure in captured_figures for axis in figure.axes]
    assert any(title.startswith("throughput") for title in titles)
    assert [title for title in titles if "error" in title] == []
    html = render_html(ReportContent(["x"], aggregate_conformance([]), [clean]))
    assert "no errors" in html.lower()


def test_markup_in_results_is_escaped(tmp_path):
    """A message, title or detail carrying HTML is shown as text, never run as markup."""
    results = sample_results()
    hostile = "<script>alert('x')</script>"
    results = [
        dataclasses.replace(r, message=hostile, detail=hostile, title=f"<b>{r.title}</b>") if r.status == "fail" else r
        for r in results
    ]
    html = render_html(ReportContent(["x"], _conformance(tmp_path, results), []))
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(" in html
    assert "<b>publish rule" not in html


def test_failure_detail_is_collapsed(tmp_path):
    """A failure's rule, source and expected/actual message are shown; its raw assertion text sits in <details>."""
    results = [
        dataclasses.replace(r, detail="assert False is True\n + where False = <built-in method get>")
        if r.status == "fail"
        else r
        for r in sample_results()
    ]
    html = render_html(ReportContent(["x"], _conformance(tmp_path, results), []))
    found = page(html)
    failures = " ".join(text for table, text in found.cells if table == "failures")
    assert "publish.rule-02" in failures and "ADR-10" in failures
    assert "expected: duplicate=True on the second publish; actual: duplicate=False" in failures
    assert any("assert False is True" in text for text in found.details)


def test_empty_inputs_render_without_error():
    """No conformance and no load results still give a document that says so."""
    content = ReportContent(["nothing"], aggregate_conformance([]), [])
    html = render_html(content)
    assert "No conformance results" in html
    assert "No load results" in html
    summary = render_markdown(content)
    assert "_no conformance results_" in summary and "_no load results_" in summary


def test_latency_table_blanks_percentiles_beyond_the_sample_count(load_tables):
    """p99.99 of fewer than 10,000 samples is not a measurement: the cell is blank, not a number."""
    few = load_tables.latency.assign(count=500)
    html = render_html(ReportContent(["x"], aggregate_conformance([]), [dataclasses.replace(load_tables, latency=few)]))
    latency = [text for table, text in page(html).cells if table and table.startswith("latency")]
    rows = [latency[i : i + len(latency) // len(few)] for i in range(0, len(latency), len(latency) // len(few))]
    assert rows and all(row[-2] == "" and row[-3] == "" for row in rows)  # p99.99 and p99.9 columns, before max


def test_steady_window_is_shaded_and_defined(load_tables, captured_figures):
    """When the aggregation measured a steady window, the report states its definition and shades it over time."""
    windowed = copy.copy(load_tables)
    windowed.window = {
        "start_ns": load_tables.origin_ns + 1_000_000_000,
        "end_ns": load_tables.origin_ns + 6_000_000_000,
        "whole_run": False,
        "definition": "Rates and percentiles cover the steady window: the 5.0 s from 1.0 s after the users started.",
    }
    html = render_html(ReportContent(["x"], aggregate_conformance([]), [windowed]))
    assert "Rates and percentiles cover the steady window: the 5.0 s" in html
    assert "Latency, milliseconds (steady window)" in html
    throughput = next(a for f in captured_figures for a in f.axes if _title(a).startswith("throughput"))
    shaded = [patch for patch in throughput.patches if patch.get_label() == "steady window"]
    assert len(shaded) == 1
    assert shaded[0].get_x() == pytest.approx(1.0)
