"""The report's durability section: made from a `jetcheck durability` run's history (jetcheck.durability.history
shapes), it times each run's acknowledged writes, errors and unknowns against its faults and counts the checker's
anomalies per fault kind and setting."""

from __future__ import annotations

import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest

from jetcheck import cli
from jetcheck.durability import history as records
from jetcheck.durability.history import HISTORY_DIR, write_history
from jetcheck.errors import ConfigError
from jetcheck.records import RUN_FILE
from jetcheck.reports.build import build_report
from jetcheck.reports.durability_report import (
    AFTER_LAST_HEAL,
    ANOMALIES,
    NO_WRITE,
    anomaly_rows,
    exposed_to,
    read_runs,
)
from jetcheck.reports.inputs import resolve
from jetcheck.testing.synthetic import sample_results, write_certify_run

from ..conftest import SERVER_VERSION

S = 1_000_000_000
T0 = 1_800_000_000 * S  # the synthetic run's first publish
NODES = ["n1", "n2", "n3"]
SECRET = "s3cr3t-pass"


def ok(write: str, seq: int, at_s: float) -> records.PublishRecord:
    at = T0 + int(at_s * S)
    return records.PublishRecord(0, write, write, 1, "ok", seq=seq, start_ns=at - S // 100, end_ns=at)


def failed(write: str, outcome: str, at_s: float) -> records.PublishRecord:
    at = T0 + int(at_s * S)
    error = f"nats: timeout via nats://admin:{SECRET}@127.0.0.1:4222"
    return records.PublishRecord(0, write, write, 1, outcome, error=error, start_ns=at - 2 * S, end_ns=at)


LOST_IN_KILL_ALL = ("p0-9", "p0-10", "p0-11")


def write_durability_run(
    folder: Path,
    version: str = "2.10.22",
    sync_interval: str = "default",
    lost: tuple[str, ...] = LOST_IN_KILL_ALL,
    more_reads: tuple[records.StoredMessage, ...] = (),
    sampled_leaders: bool = True,
) -> Path:
    """A 30 s run with a kill of every node at 10-12 s and a pause of the leader at 20-22 s: one write a second
    acknowledged; the three acknowledged at 9.5, 10.5 and 11.5 s are absent from every node (lost to the kill-all),
    those acknowledged during the pause are all there; one write timed out and one got an error during the kill.
    `lost` replaces the writes absent from every node; `more_reads` are messages some nodes serve besides. The
    stream's leader, sampled every second, is n1 (term 1), then n2 (term 2) after the kill, then n3 (term 3) after
    the pause; n1 leads the meta group throughout (none of it written unless `sampled_leaders`)."""
    publishes = [ok(f"p0-{n}", n + 1, n + 0.5) for n in range(30)]
    publishes += [failed("p1-0", "unknown", 11.0), failed("p1-1", "error", 11.2)]
    stored = [p for p in publishes if p.outcome == "ok" and p.write not in lost]
    reads = [records.StoredMessage(node, p.seq, p.write, p.msg_id) for node in NODES for p in stored]
    reads += more_reads
    deliveries = [records.DeliveryRecord(p.seq, p.write, p.msg_id, 1, p.end_ns) for p in stored]
    faults = [
        records.FaultRecord(0, "kill-all", NODES, T0 + 10 * S, T0 + 12 * S),
        records.FaultRecord(
            1,
            "pause-leader",
            ["n2"],
            T0 + 20 * S,
            T0 + 22 * S,
            detail=f"<b>leader</b> via nats://admin:{SECRET}@127.0.0.1:4222",
        ),
    ]
    history = folder / HISTORY_DIR
    write_history(history, publishes, records.PublishRecord)
    write_history(history, deliveries, records.DeliveryRecord)
    write_history(history, reads, records.StoredMessage)
    write_history(history, faults, records.FaultRecord)
    if sampled_leaders:
        stream_leader = {0: ("n1", 1), 13: ("n2", 2), 23: ("n3", 3)}
        claims, leader = [], stream_leader[0]
        for second in range(30):
            leader = stream_leader.get(second, leader)
            at = T0 + second * S
            claims += [records.LeaderClaim("n1", "_meta_", 1, at, at + S // 10)]
            claims += [records.LeaderClaim(leader[0], "S-R3F-abc", leader[1], at, at + S // 10)]
        write_history(history, claims, records.LeaderClaim)
    # the rules' own results are the durability command's (tests/durability); the section reads history/ and run.json
    results = sample_results(server_version=version, rules=4, failing=())
    write_certify_run(folder, results)  # results.jsonl; run.json is the durability command's, below
    run = {
        "kind": "durability",
        "server": {"version": version, "nodes": 3, "sync_interval": sync_interval},
        "client": {"name": "nats-py", "version": "2.16.0"},
        "options": {"seed": 5, "faults": ["kill-all", "pause-leader"], "duration_s": 30.0, "nodes": 3},
        "counts": {"publishes": len(publishes), "deliveries": len(deliveries), "faults": len(faults)},
        "recovery_s": 0.2,
        "final_read": {"reference": "n1", "unreadable": {}, "node_states": {}},
        "started_at": "2027-01-15T08:00:00+00:00",
        "finished_at": "2027-01-15T08:00:40+00:00",
        "collected": len(results),
    }
    (folder / RUN_FILE).write_text(json.dumps(run), encoding="utf-8")
    return folder


def rows_by_fault(rows: list[dict]) -> dict[str, dict]:
    return {row["fault"]: row for row in rows}


def test_each_anomaly_counts_against_the_first_fault_not_yet_healed_when_its_write_was_acked():
    """A write acked before a fault or during it meets that fault first; after the last heal it meets none."""
    faults = [records.FaultRecord(0, "kill-all", NODES, 10, 12), records.FaultRecord(1, "pause-leader", ["n2"], 20, 22)]
    assert [exposed_to(at, faults) for at in (5, 11, 12, 15, 21, 23)] == [
        "kill-all",
        "kill-all",
        "kill-all",
        "pause-leader",
        "pause-leader",
        AFTER_LAST_HEAL,
    ]


def test_three_writes_lost_in_a_kill_all_and_none_in_a_pause_are_counted_per_fault_kind(tmp_path):
    """The synthetic history's three lost acks are the kill-all's; its pause lost nothing, and says so."""
    runs = read_runs([resolve(write_durability_run(tmp_path / "run"))])
    rows = rows_by_fault(anomaly_rows(runs))
    assert set(rows) == {"kill-all", "pause-leader"}
    assert rows["kill-all"] == {
        "version": "2.10.22",
        "sync_interval": "default",
        "nodes": 3,
        "fault": "kill-all",
        "runs": 1,
        "faults": 1,
        "lost": 3,
        "undelivered": 3,
        "duplicated": 0,
        "divergent": 0,
        "phantom": 0,
    }
    pause = rows["pause-leader"]
    assert (pause["faults"], pause["lost"], pause["undelivered"], pause["divergent"]) == (1, 0, 0, 0)


def test_duplicates_divergences_phantoms_and_late_losses_land_in_their_own_rows(tmp_path):
    """A message id stored twice (acked during the pause), a seq only n3 serves (holding a write acked before the
    kill-all), a message nobody wrote and a write lost after the last heal: each counted once, where it belongs."""
    again = [records.StoredMessage(node, 100, "p0-20", "p0-20") for node in NODES]  # p0-20: acked at 20.5 s
    only_n3 = [records.StoredMessage("n3", 101, "p0-5", "p0-5")]  # p0-5: acked at 5.5 s
    ghost = [records.StoredMessage(node, 102, "ghost", "") for node in NODES]
    folder = write_durability_run(tmp_path / "run", lost=("p0-25",), more_reads=(*again, *only_n3, *ghost))
    rows = rows_by_fault(anomaly_rows(read_runs([resolve(folder)])))
    counts = {kind: {a: row[a] for a in ANOMALIES if row[a]} for kind, row in rows.items()}
    assert counts == {
        "kill-all": {"divergent": 1},
        "pause-leader": {"duplicated": 1},
        AFTER_LAST_HEAL: {"lost": 1, "undelivered": 1},
        NO_WRITE: {"phantom": 1},
    }


def test_the_table_sums_runs_of_one_setting_and_keeps_settings_apart(tmp_path):
    """Two runs of 2.10.22 sum into one row per fault kind; a sync_interval always run has rows of its own."""
    folders = [
        write_durability_run(tmp_path / "a"),
        write_durability_run(tmp_path / "b"),
        write_durability_run(tmp_path / "c", sync_interval="always"),
    ]
    rows = anomaly_rows(read_runs([resolve(f) for f in folders]))
    by_setting = {(r["sync_interval"], r["fault"]): (r["runs"], r["faults"], r["lost"]) for r in rows}
    assert by_setting == {
        ("default", "kill-all"): (2, 2, 6),
        ("default", "pause-leader"): (2, 2, 0),
        ("always", "kill-all"): (1, 1, 3),
        ("always", "pause-leader"): (1, 1, 0),
    }


class _Document(HTMLParser):
    """The section's table cells and chart images, as a browser would find them."""

    def __init__(self) -> None:
        super().__init__()
        self.in_section = False
        self.cells: list[list[str]] = []
        self.images: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "section":
            self.in_section = attrs.get("id") == "durability"
        elif self.in_section and tag == "tr":
            self.cells.append([])
        elif self.in_section and tag in ("td", "th"):
            self._cell = []
        elif self.in_section and tag == "img":
            self.images.append(attrs.get("src", ""))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.cells[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_a_report_of_a_durability_run_has_the_section_with_its_table_and_timeline(tmp_path):
    """index.html and summary.md get a Durability section: the per-fault table, the run's facts and a PNG chart;
    the credentials in its errors and fault details never reach either, and markup in them is escaped."""
    outcome = build_report([str(write_durability_run(tmp_path / "run"))], out=tmp_path / "report")
    html = outcome.index.read_text(encoding="utf-8")
    markdown = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    document = _Document()
    document.feed(html)
    assert document.cells[0][:4] == ["server version", "sync_interval", "nodes", "fault kind"]
    table = {row[3]: row for row in document.cells[1:] if len(row) == 11}
    assert table["kill-all"][6] == "3" and table["pause-leader"][6] == "0", document.cells
    facts = {row[0]: row[1] for row in document.cells if len(row) == 2}
    assert facts["seed"] == "5" and facts["sync_interval"] == "default"
    assert facts["schedule"] == (
        "kill-all (n1, n2, n3) at 9.5 s for 2.0 s; "
        "pause-leader (n2; <b>leader</b> via nats://***@127.0.0.1:4222) at 19.5 s for 2.0 s"
    )
    assert len(document.images) == 1 and document.images[0].startswith("data:image/png;base64,")
    assert base64.b64decode(document.images[0].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    assert "## Durability" in markdown
    anomalies = pd.read_csv(tmp_path / "report" / "tables" / "durability_anomalies.csv").set_index("fault")
    assert (anomalies.loc["kill-all", "lost"], anomalies.loc["pause-leader", "lost"]) == (3, 0)
    assert re.search(r"\| 2\.10\.22 \| default \| 3 \| kill-all \| 1 \| 1 \| 3 \|", markdown), markdown
    assert SECRET not in html and SECRET not in markdown
    section = html.split('<section id="durability">', 1)[1]
    assert "&lt;b&gt;leader&lt;/b&gt; via nats://" in section and "<b>" not in section


@pytest.mark.parametrize(("sampled", "said"), [(True, "meta 0, stream 2"), (False, "not sampled")])
def test_a_durability_runs_facts_count_the_leader_changes_per_kind_of_group(tmp_path, sampled, said):
    """The run's facts say how often each kind of Raft group changed leader after its first, from the /raftz
    samples (the timeline marks each change); a run without samples says so."""
    build_report([str(write_durability_run(tmp_path / "run", sampled_leaders=sampled))], out=tmp_path / "report")
    document = _Document()
    document.feed((tmp_path / "report" / "index.html").read_text(encoding="utf-8"))
    facts = {row[0]: row[1] for row in document.cells if len(row) == 2}
    assert facts["leader changes"] == said


def test_what_was_tested_gives_a_durability_runs_cluster_its_node_count(tmp_path):
    """A durability run's run.json names its nodes, not a cluster name: the report says a 3-node cluster, not a
    single server (issue 30)."""
    build_report([str(write_durability_run(tmp_path / "run"))], out=tmp_path / "report")
    markdown = (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")
    assert "- cluster shape: 3-node cluster" in markdown, markdown
    assert "single server" not in markdown


def test_a_durability_run_on_five_nodes_with_an_r3_stream_says_so(tmp_path):
    """The run's facts give the real shape: 5 nodes and the stream on 3 of them, not "replicated on every node"."""
    folder = write_durability_run(tmp_path / "run")
    run = json.loads((folder / RUN_FILE).read_text(encoding="utf-8"))
    run["server"].update(nodes=5, replicas=3)
    (folder / RUN_FILE).write_text(json.dumps(run), encoding="utf-8")
    build_report([str(folder)], out=tmp_path / "report")
    html = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    assert "5-node cluster, R3 stream (on 3 of the 5 nodes)" in html


def test_a_report_without_durability_runs_has_no_durability_section(tmp_path):
    """A certify run says nothing about durability."""
    certify = write_certify_run(tmp_path / "certify", sample_results())
    index = build_report([str(certify)], out=tmp_path / "report").index
    assert 'id="durability"' not in index.read_text(encoding="utf-8")
    assert "## Durability" not in (tmp_path / "report" / "summary.md").read_text(encoding="utf-8")


@pytest.mark.timeout(600)
def test_a_real_short_run_reports_its_faults_and_acked_throughput(tmp_path, capsys):
    """A 10 s `jetcheck durability` run with one leader pause (nothing lost on the current release) gives a report
    whose table has the pause's row with no anomaly and whose chart is drawn."""
    out = tmp_path / "durability"
    argv = ["durability", "--server-version", SERVER_VERSION, "--duration", "10s", "--seed", "3"]
    code = cli.main([*argv, "--faults", "pause-leader", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.out + printed.err
    (run,) = read_runs([resolve(out)])
    assert run.rates["acked"].sum() > 50 and [f.kind for f in run.faults] == ["pause-leader"]
    (row,) = anomaly_rows([run])
    assert (row["fault"], row["faults"], row["lost"], row["divergent"], row["phantom"]) == ("pause-leader", 1, 0, 0, 0)
    html = build_report([str(out)], out=tmp_path / "report").index.read_text(encoding="utf-8")
    document = _Document()
    document.feed(html)
    assert len(document.images) == 1 and document.images[0].startswith("data:image/png;base64,")


def test_a_history_line_that_is_no_record_is_refused_naming_its_folder(tmp_path):
    """A publishes.jsonl line with a field no PublishRecord has stops the report with a ConfigError, not a traceback."""
    folder = write_durability_run(tmp_path / "run")
    with open(folder / HISTORY_DIR / "publishes.jsonl", "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"write": "p9-0", "colour": "red"}) + "\n")
    with pytest.raises(ConfigError, match=r"history: a PublishRecord line is not what jetcheck durability writes"):
        build_report([str(folder)], out=tmp_path / "report")
