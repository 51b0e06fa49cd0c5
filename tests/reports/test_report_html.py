"""The HTML report renders in headless Chromium: charts present, nothing loaded from outside, a screenshot."""

from __future__ import annotations

import json
import re
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jetcheck import cli

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
# Appended to a copy of the report: after load, writes what the page loaded into the DOM for --dump-dom.
PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images];
  const result = {
    images: images.length,
    charts: document.querySelectorAll("img.chart").length,
    broken: images.filter((img) => !(img.complete && img.naturalWidth > 0)).length,
    fetched: performance.getEntriesByType("resource").map((entry) => entry.name),
  };
  const out = document.createElement("pre");
  out.id = "probe";
  out.textContent = JSON.stringify(result);
  document.body.appendChild(out);
});
</script>"""


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium package to run the report render check")
    argv = [str(CHROMIUM), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)


class _References(HTMLParser):
    def __init__(self):
        super().__init__()
        self.references: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("src", "href") and value is not None:
                self.references.append((tag, name, value))


def test_report_references_only_embedded_data(built_report):
    """Every src is a data: URI and every link an in-page anchor: the report reads offline."""
    parser = _References()
    parser.feed(built_report.index.read_text(encoding="utf-8"))
    assert parser.references
    outside = [ref for ref in parser.references if not ref[2].startswith(("data:", "#"))]
    assert outside == []


def test_report_renders_charts_in_chromium(built_report, tmp_path):
    """Chromium loads the report with all chart images decoded and no resource fetched."""
    probe = tmp_path / "probe.html"
    probe.write_text(built_report.index.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"))
    done = chromium(tmp_path, "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    found = re.search(r'<pre id="probe">(.*?)</pre>', done.stdout)
    assert found, f"chromium produced no probe output (exit {done.returncode}): {done.stderr[-2000:]}"
    result = json.loads(found.group(1).replace("&quot;", '"'))
    assert result["charts"] == 3  # checks by area, load timeline, latency by percentile
    assert result["broken"] == 0
    assert result["fetched"] == []


def test_report_screenshot_is_saved(built_report, tmp_path):
    """A full-page screenshot of the report is written as a PNG."""
    shot = tmp_path / "report.png"
    done = chromium(tmp_path, "--window-size=1280,6000", f"--screenshot={shot}", built_report.index.as_uri())
    assert shot.exists(), f"no screenshot (exit {done.returncode}): {done.stderr[-2000:]}"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # a blank page is a few KB
    print(f"screenshot: {shot}")


def test_report_writes_summary_and_tables(built_report):
    """summary.md states the verdict; every table is written as CSV and Parquet."""
    out = built_report.index.parent
    summary = (out / "summary.md").read_text()
    verdict = "- server 2.15.1: 1 MUST server rule fails, 19/24 server rules pass (3 not in profile, 1 not run)"
    assert f"**FAILED**\n\n{verdict}" in summary
    assert "**Caveat:** publishers and consumers shared process(es)" in summary
    assert "<strong>Caveat:</strong> publishers and consumers shared" in built_report.index.read_text()
    names = {p.stem for p in (out / "tables").iterdir()}
    assert {"conformance_summary", "conformance_matrix", "load_latency", "load_throughput", "load_samples"} <= names
    for name in names:
        assert (out / "tables" / f"{name}.csv").exists() and (out / "tables" / f"{name}.parquet").exists()


def test_report_command_with_baseline_exits_1_on_regression(spark, run_folder, tmp_path, capsys):
    """`jetcheck report --baseline` prints index.html's path and exits 1 when a regression is found."""
    from jetcheck.testing.synthetic import sample_results, write_certify_run

    baseline = write_certify_run(tmp_path / "baseline", sample_results(failing=()))
    code = cli.main(["report", "--in", str(run_folder), "--baseline", str(baseline), "--out", str(tmp_path / "r")])
    assert code == 1
    assert capsys.readouterr().out.strip() == str((tmp_path / "r" / "index.html").resolve())
    assert "regression" in (tmp_path / "r" / "index.html").read_text()
