"""`jetcheck load` runs Locust headless against a real server: logs match what the server stored, rates hold."""

from __future__ import annotations

import asyncio
import csv
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest

from jetcheck import cli
from jetcheck.load import runfile
from jetcheck.load.scenarios import SCENARIOS

from ..conftest import VENDOR_PASSWORD

NS = 1_000_000_000


def flags(**options: object) -> list[str]:
    """Command-line flags for option values: max_inflight=5 is --max-inflight 5."""
    return [text for name, value in options.items() for text in ("--" + name.replace("_", "-"), str(value))]


def run_load(tmp_path: Path, target, *args: str, **options: object) -> tuple[int, dict, dict, Path]:
    """`jetcheck load` against `target` (None: the server it starts itself) with `args` and the flags of `options`;
    its exit status, load.json, summary.json and output folder."""
    out = tmp_path / "out"
    server = ["--server", target.url, "--monitor", target.process.monitor_url] if target else ["--server", "local"]
    rc = cli.main(["load", *server, "--out", str(out), *args, *flags(**options)])
    return rc, runfile.read(out), json.loads((out / "summary.json").read_text()), out


def ops_table(out: Path):
    return ds.dataset(out / "ops", format="parquet").to_table()


def locust_totals(out: Path) -> tuple[int, int]:
    """Locust's own totals (requests, failures) from its final ``<csv>_stats.csv``."""
    with open(out / "locust_stats.csv", newline="") as fh:
        aggregated = next(row for row in csv.DictReader(fh) if row["Name"] == "Aggregated")
    return int(aggregated["Request Count"]), int(aggregated["Failure Count"])


def assert_no_lost_records(summary: dict) -> None:
    assert summary["checks"], "no record-count check ran"
    failed = [c for c in summary["checks"] if not c["pass"]]
    assert not failed, failed


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_each_scenario_logs_exactly_what_the_server_stored(tmp_path, embedded_server, scenario):
    """Every scenario runs headless; its op-log row count equals the server's stream/consumer counts."""
    spec = SCENARIOS[scenario]
    users = 3 if spec.consumer and spec.publisher else 2
    paced = {"rate": 1500} if spec.paced else {}
    # end-to-end needs a delivery inside the run: on a loaded machine its three processes took 1.96 s to send their
    # first publish, and the consumer had none before a 2 s run ended (a fresh-clone run beside other tests)
    duration = "6s" if scenario == "end-to-end" else "2s"
    rc, run, summary, out = run_load(
        tmp_path, embedded_server, scenario=scenario, duration=duration, users=users, prefill=3000, **paced
    )
    assert rc == 0, summary["checks"]
    assert_no_lost_records(summary)
    assert summary["rows"] > 0
    assert locust_totals(out)[0] == summary["rows"], "Locust's request count is not the op log's"
    assert run["scenario"] == scenario
    assert run["deleted"] == [run["stream"]], "the run's stream was not deleted"
    assert not list((out / "ops").glob(".*.part")), "an op-log file was left unfinished"
    if scenario == "end-to-end":
        assert summary["ops"]["consume"]["e2e_us"]["p50"] > 0
    if spec.consumer and spec.publisher:  # by default every user has its own process: no role shares a loop
        assert run["processes"] == 3 and all(len(roles) == 1 for roles in run["process_roles"].values())
        assert summary["notes"] == []


def test_publishers_and_consumers_in_one_process_carry_a_caveat(tmp_path, embedded_server):
    """When one process runs both roles, load.json says so and the summary warns that consumer figures understate
    the server."""
    rc, run, summary, _out = run_load(
        tmp_path, embedded_server, scenario="end-to-end", rate="1000", users="2", processes="1", duration="2s"
    )
    assert rc == 0
    assert_no_lost_records(summary)
    assert list(run["process_roles"].values()) == [["consumer", "publisher"]]
    (note,) = summary["notes"]
    assert note.startswith(f"publishers and consumers shared process(es) {next(iter(run['process_roles']))}:")


def test_fixed_rate_holds_within_5_percent_with_distinct_sub_ms_percentiles(tmp_path):
    """Against the embedded server it starts itself, 2000 ops/s over 2 users is achieved within 5%."""
    rate = 2000.0
    rc, run, summary, out = run_load(
        tmp_path, None, scenario="publish-async", rate=f"{rate:g}", users="2", duration="6s"
    )
    assert rc == 0
    assert_no_lost_records(summary)
    assert (run["mode"], run["rate"], run["rate_per_publisher"]) == ("open", rate, rate / 2)
    table = ops_table(out)
    ok = table.filter(table["ok"])
    # completions per second in the steady middle of the run (the first and last second ramp up and drain)
    first, last = pc.min(ok["intended_ns"]).as_py(), pc.max(ok["intended_ns"]).as_py()
    lo, hi = first + NS, last - NS
    done = ok.filter(pc.and_(pc.greater_equal(ok["end_ns"], lo), pc.less(ok["end_ns"], hi))).num_rows
    achieved = done / ((hi - lo) / NS)
    assert abs(achieved - rate) / rate < 0.05, f"achieved {achieved:.0f}/s for a target of {rate:.0f}/s"
    service = pc.subtract(ok["end_ns"], ok["start_ns"])
    p50, p90, p99 = pc.quantile(service, q=[0.5, 0.9, 0.99], interpolation="nearest").to_pylist()
    assert p50 < p90 < p99, (p50, p90, p99)
    whole_ms = pc.sum(pc.equal(pc.subtract(service, pc.multiply(pc.divide(service, 1_000_000), 1_000_000)), 0))
    assert whole_ms.as_py() < len(service) * 0.01, "service times look rounded to whole milliseconds"
    assert run["monitor"]["samples"] >= 3 and list((out / "samples").glob("samples-*.parquet"))


def test_an_unsustainable_rate_shows_as_send_delay_not_as_a_slower_schedule(tmp_path, embedded_server):
    """When the client cannot send at the target rate, intended times keep their pace and the delay is logged."""
    # One user's loop sends (or logs as Overflow) about 300k operations/s on a fast 2-core machine: the rate must be
    # beyond that on any machine, or the loop keeps pace and there is no delay to log.
    rate = 1_000_000
    _rc, _run, summary, _out = run_load(
        tmp_path,
        embedded_server,
        scenario="publish-async",
        rate=str(rate),
        users="1",
        duration="3s",
        max_inflight="200000",
    )
    assert_no_lost_records(summary)
    publish = summary["ops"]["publish"]
    assert publish["rate_per_s"] < rate * 0.8
    assert publish["send_delay_us"]["p99"] > 100_000, publish["send_delay_us"]  # behind by more than 100 ms
    assert publish["response_us"]["p50"] > publish["service_us"]["p50"]


def test_too_much_in_flight_is_counted_as_overflow(tmp_path, embedded_server):
    """With max in-flight 5 and a rate far beyond it, unsent operations are logged as Overflow errors."""
    rc, _run, summary, _out = run_load(
        tmp_path, embedded_server, scenario="publish-sync", rate="20000", users="1", duration="2s", max_inflight="5"
    )
    assert_no_lost_records(summary)
    publish = summary["ops"]["publish"]
    assert publish["overflow"] > 1000
    assert publish["ok"] > 0
    assert rc == 0  # overflow is a measured outcome, not lost records


def test_two_processes_write_one_log_set_each(tmp_path, embedded_server):
    """--processes 2 runs two Locust workers; both write ops-<pid>-<n>.parquet and no record is lost."""
    rc, run, summary, out = run_load(
        tmp_path, embedded_server, scenario="publish-async", rate="2000", users="4", processes="2", duration="3s"
    )
    assert rc == 0
    assert_no_lost_records(summary)
    assert run["processes"] == 2 and len(run["workers_drained"]) == 2
    pids = set(ops_table(out)["process"].to_pylist())
    assert len(pids) == 2
    names = {p.name.split("-")[1] for p in (out / "ops").glob("ops-*-*.parquet")}
    assert names == {str(pid) for pid in pids}


def test_a_vendor_server_with_tls_and_a_password_takes_load_and_the_password_stays_secret(
    tmp_path, vendor_server, monkeypatch, capsys
):
    """With its CA and user on the command line and the password in JETCHECK_PASSWORD, load runs against a TLS
    server in several processes, and the password is in no file the run writes nor in its output."""
    server, certs = vendor_server
    monkeypatch.setenv("JETCHECK_PASSWORD", VENDOR_PASSWORD)
    out = tmp_path / "out"
    target = flags(server=server.url, monitor=server.monitor_url, tls_ca=certs / "ca.pem", user="vendor")
    # 4 s: in 2 s, beside 2 busy loops, the consuming user once did not get to its first consume (no consume op)
    rc = cli.main(["load", *target, *flags(scenario="end-to-end", rate=500, users=2, duration="4s", out=out)])
    printed = capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert rc == 0, printed.out + printed.err
    assert_no_lost_records(summary)
    assert summary["ops"].get("consume", {}).get("ok", 0) > 0, f"no message consumed: {summary['ops']}"
    assert runfile.read(out)["deleted"], "the run's stream was not deleted"
    assert runfile.read(out)["tls"] is True, "load.json does not record the TLS transport used"
    written = b"".join(p.read_bytes() for p in out.rglob("*") if p.is_file())
    assert VENDOR_PASSWORD.encode() not in written
    assert VENDOR_PASSWORD not in printed.out + printed.err


def test_a_wrong_password_is_one_clear_line_and_no_load(tmp_path, vendor_server, capsys):
    """A refused login ends `jetcheck load` with exit 2 and one line naming the cause, before Locust starts."""
    server, certs = vendor_server
    out = tmp_path / "out"
    args = ["--tls-ca", str(certs / "ca.pem"), "--user", "vendor", "--password", "wrong-pw"]
    rc = cli.main(["load", "--server", server.url, *args, "--scenario", "publish-async", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("jetcheck: authentication to nats://"), err
    assert len(err.strip().splitlines()) == 1 and "wrong-pw" not in err
    assert not (out / "locust.log").exists()


@pytest.mark.asyncio
async def test_an_interrupted_load_on_a_url_target_deletes_its_stream(tmp_path, embedded_server):
    """Ctrl-C while Locust runs against a server jetcheck does not own: Locust is stopped, the run's stream is
    deleted, and the command exits 130 with one line."""
    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "jetcheck.cli", "load", "--server", embedded_server.url, "--scenario", "publish-async",
         "--rate", "200", "--duration", "120s", "--out", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    nc = await embedded_server.connect()
    try:
        js = nc.jetstream()

        async def load_streams() -> list[str]:
            names = [info.config.name for info in await js.streams_info()]
            return [name for name in names if name.endswith("_LOAD_PUBLISH_ASYNC")]

        deadline = time.monotonic() + 60
        while not ((out / "locust.log").exists() and await load_streams()):  # Locust has started on a real stream
            assert time.monotonic() < deadline and proc.poll() is None, proc.communicate()
            await asyncio.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _stdout, stderr = await asyncio.to_thread(proc.communicate, timeout=60)
        assert proc.returncode == 130, stderr
        assert stderr.strip().splitlines()[-1] == "jetcheck: interrupted"
        assert await load_streams() == []
        # the signal often lands as Locust starts: one left running would make its stream again and load the target
        # for its whole run time (issue 31)
        locusts = [p for p in psutil.process_iter(["cmdline"]) if str(out) in " ".join(p.info["cmdline"] or [])]
        assert locusts == [], "a process of the interrupted load still runs"
    finally:
        await nc.close()
