"""The report's "Clients side by side" table, from real `jetcheck load --client X` runs of two clients."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetcheck import cli
from jetcheck.conformance.clients.build import go_driver
from jetcheck.errors import ConfigError
from jetcheck.reports.cells import milliseconds
from jetcheck.reports.client_comparison import HEADERS, clients_side_by_side
from jetcheck.reports.inputs import resolve
from jetcheck.reports.render import ReportContent, render_html, render_markdown

RATE = 300


@pytest.fixture(scope="module")
def client_runs(tmp_path_factory, embedded_server) -> dict[str, Path]:
    """Two short load runs at the same offered rate against one server: nats.go (through its driver) and nats-py."""
    try:
        go_driver()
    except ConfigError as exc:
        pytest.skip(f"the nats.go driver cannot be built here: {exc}")
    runs = {}
    for client in ("nats.go", "nats-py"):
        out = tmp_path_factory.mktemp("clients") / client.replace(".", "-")
        args = ["load", "--server", embedded_server.url, "--monitor", embedded_server.process.monitor_url]
        args += ["--client", client, "--scenario", "publish", "--rate", str(RATE), "--duration", "3s"]
        assert cli.main([*args, "--out", str(out)]) == 0
        runs[client] = out
    return runs


def test_a_report_of_two_clients_puts_them_side_by_side(spark, client_runs):
    """With load runs of two clients, the report (summary.md, index.html) has one row per client: its exact version,
    the offered rate, its steady ok/s near that rate, and the same response-time percentiles as its latency table."""
    from jetcheck.reports.conformance_report import aggregate_conformance
    from jetcheck.reports.load_report import aggregate_load

    result_sets = [resolve(path) for path in client_runs.values()]
    loads = [aggregate_load(spark, result_set) for result_set in result_sets]
    content = ReportContent(inputs=[], conformance=aggregate_conformance(result_sets), loads=loads)
    summary = render_markdown(content)
    assert "### Clients side by side" in summary and 'id="clients-load"' in render_html(content)
    table = clients_side_by_side(loads)
    assert table is not None and table.headers == HEADERS
    by_client = {row[1].text.split()[0]: [cell.text for cell in row] for row in table.rows}
    assert set(by_client) == {"nats.go", "nats-py"}
    for load in loads:
        row = by_client[load.info["client"]["name"]]
        assert row[1] == f"{load.info['client']['name']} {load.info['client']['version']}"
        assert row[3] == f"{RATE} / s" and row[4] == "publish"
        assert 0.5 * RATE <= float(row[5].replace(",", "")) <= 1.5 * RATE
        response = load.latency[(load.latency["op"] == "publish") & (load.latency["metric"] == "response")].iloc[0]
        assert row[6:8] == [milliseconds(float(response["p50"])), milliseconds(float(response["p99"]))]
        assert "| " + " | ".join(row) + " |" in summary
    assert clients_side_by_side(loads[:1]) is None, "one client has nothing to compare"
