"""The report's durability section: per `jetcheck durability` run, acknowledged writes, errors and unknowns over time
against the faults done, and anomalies (lost, undelivered, duplicated, divergent, phantom) per fault kind and setting.

A durability run's folder holds ordinary results (its rules are the conformance part's `durability` area) and a
`history/` folder of JSONL records (jetcheck.durability.history). The history is small (one line per publish
attempt, delivery and stored message: tens of thousands of lines), so it is read with read_history on the driver, as
the conformance results are; Spark is kept for the load logs. The anomalies are the checker's own
(jetcheck.durability.checker.check_history, re-run on the history), so the counts here are those of the rules.

Each anomaly is tied to a fault by the time of the write it concerns (when it was acknowledged, or first sent when
it never was): to the first fault of the schedule not yet healed by then, the one the write was exposed to first. A
write lost in a kill of every node was acknowledged before the kill (and not yet on disk), one lost while a node was
paused during the pause: both meet the fault that lost them first. Anomalies after the last heal, and those that
concern no write (a replica whose state differs, a node that could not be read), are counted in rows of their own.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from jetcheck.durability.checker import (
    ACKED_DELIVERED,
    ACKED_SURVIVE,
    DEDUP,
    NO_PHANTOM,
    REPLICAS_AGREE,
    History,
    check_history,
)
from jetcheck.durability.history import (
    HISTORY_DIR,
    DeleteRecord,
    DeliveryRecord,
    FaultRecord,
    LeaderClaim,
    PublishRecord,
    PurgeRecord,
    StoredMessage,
    read_history,
)
from jetcheck.durability.leaders import LeaderChange, leader_changes
from jetcheck.errors import ConfigError
from jetcheck.reports.cells import Cell, Table, number
from jetcheck.reports.conformance_report import redact_text
from jetcheck.reports.inputs import ResultSet
from jetcheck.versions import version_sort_key

# anomaly -> the rule whose violations it counts
ANOMALIES = {
    "lost": ACKED_SURVIVE,
    "undelivered": ACKED_DELIVERED,
    "duplicated": DEDUP,
    "divergent": REPLICAS_AGREE,
    "phantom": NO_PHANTOM,
}
AFTER_LAST_HEAL = "after the last heal"
NO_WRITE = "not tied to a write"
BIN_S = 1.0  # the timeline's rates are per second
LEADER_KINDS = ("meta", "stream", "consumer")  # the timeline's rows of leader changes, top to bottom


@dataclass(frozen=True)
class DurabilityRun:
    """One durability run as the report shows it."""

    label: str
    info: dict[str, Any]  # run.json
    faults: list[FaultRecord]
    origin_ns: int  # the timeline's zero: the first publish
    rates: dict[str, np.ndarray]  # "acked", "errors", "unknown" -> count per BIN_S from origin_ns
    anomalies: dict[str, Counter[str]]  # fault kind (or AFTER_LAST_HEAL, NO_WRITE) -> anomaly -> count
    acked: int
    unknown: int
    leader_changes: list[LeaderChange]  # from the nodes' /raftz samples; empty for runs before they were taken

    @property
    def setting(self) -> tuple[str, str, int]:
        server = self.info.get("server") or {}
        return str(server.get("version", "")), str(server.get("sync_interval", "")), int(server.get("nodes") or 0)


def is_durability(result_set: ResultSet) -> bool:
    return result_set.certify is not None and (result_set.certify / HISTORY_DIR).is_dir()


def _history(folder: Path, kind: type) -> list[Any]:
    try:
        return read_history(folder, kind)
    except FileNotFoundError:
        return []
    except (json.JSONDecodeError, UnicodeDecodeError, TypeError) as exc:
        raise ConfigError(f"{folder}: a {kind.__name__} line is not what jetcheck durability writes ({exc})") from None


def write_times(publishes: list[PublishRecord]) -> dict[str, int]:
    """When each write met the cluster: its first acknowledgement, or its first send when none was acknowledged."""
    acked: dict[str, int] = {}
    sent: dict[str, int] = {}
    for record in publishes:
        if record.outcome == "ok":
            acked[record.write] = min(acked.get(record.write, record.end_ns), record.end_ns)
        sent[record.write] = min(sent.get(record.write, record.start_ns), record.start_ns)
    return {write: acked.get(write, at) for write, at in sent.items()}


def exposed_to(at_ns: int, faults: list[FaultRecord]) -> str:
    """The kind of the first fault not yet healed at `at_ns` (faults in schedule order), else AFTER_LAST_HEAL."""
    for fault in faults:
        if at_ns <= fault.healed_ns:
            return fault.kind
    return AFTER_LAST_HEAL


def read_run(result_set: ResultSet) -> DurabilityRun:
    """The history of the durability run in `result_set`, checked and tied to its faults."""
    folder = result_set.certify / HISTORY_DIR
    info = result_set.run_info()
    publishes = _history(folder, PublishRecord)
    faults = sorted(_history(folder, FaultRecord), key=lambda fault: fault.start_ns)
    reads: dict[str, list[StoredMessage]] = {}
    for message in _history(folder, StoredMessage):
        reads.setdefault(message.node, []).append(message)
    final = info.get("final_read") or {}
    # runs before final_read was recorded: the node that served the most is the best stand-in for the leader
    reference = final.get("reference") or max(sorted(reads), key=lambda node: len(reads[node]), default="")
    claims = _history(folder, LeaderClaim)
    history = History(
        publishes,
        _history(folder, DeliveryRecord),
        reads,
        reference,
        final.get("unreadable") or {},
        final.get("node_states") or {},
        final.get("stream_error") or "",
        final.get("consumer_error") or "",
        claims,
        _history(folder, DeleteRecord),
        _history(folder, PurgeRecord),
    )
    findings = check_history(history)
    times = write_times(publishes)
    anomalies: dict[str, Counter[str]] = {fault.kind: Counter() for fault in faults}
    for anomaly, rule in ANOMALIES.items():
        finding = findings[rule]
        for write in finding.writes:
            kind = exposed_to(times[write], faults) if write in times else NO_WRITE
            anomalies.setdefault(kind, Counter())[anomaly] += 1
        if finding.count > len(finding.writes):
            anomalies.setdefault(NO_WRITE, Counter())[anomaly] += finding.count - len(finding.writes)
    origin = min((p.start_ns for p in publishes), default=min((f.start_ns for f in faults), default=0))
    end = max([p.end_ns for p in publishes] + [f.healed_ns for f in faults] + [origin])
    bins = int((end - origin) / 1e9 / BIN_S) + 1
    rates = {}
    for outcome, name in (("ok", "acked"), ("error", "errors"), ("unknown", "unknown")):
        at = [int((p.end_ns - origin) / 1e9 / BIN_S) for p in publishes if p.outcome == outcome and p.end_ns >= origin]
        rates[name] = np.bincount(np.array(at, dtype=np.int64), minlength=bins)[:bins] / BIN_S
    figures = findings[ACKED_SURVIVE].figures
    return DurabilityRun(
        result_set.label,
        info,
        faults,
        origin,
        rates,
        anomalies,
        figures.get("acked", 0),
        figures.get("unknown", 0),
        leader_changes(claims),
    )


def read_runs(result_sets: list[ResultSet]) -> list[DurabilityRun]:
    return [read_run(rs) for rs in result_sets if is_durability(rs)]


# --- what the templates show --------------------------------------------------------------------------------------


def anomaly_rows(runs: list[DurabilityRun]) -> list[dict[str, Any]]:
    """One row per setting (server version, sync_interval, nodes) and fault kind, summed over the runs: how many runs
    and faults of that kind, and each anomaly's count. A fault kind is listed for a setting when one of its runs'
    schedules held it (its zeros are findings too); the AFTER_LAST_HEAL and NO_WRITE rows only when they count."""
    rows: dict[tuple[str, str, int, str], dict[str, Any]] = {}
    for run in runs:
        done = Counter(fault.kind for fault in run.faults)
        for kind, counts in run.anomalies.items():
            if kind in (AFTER_LAST_HEAL, NO_WRITE) and not sum(counts.values()):
                continue
            row = rows.setdefault((*run.setting, kind), {"runs": set(), "faults": 0, **dict.fromkeys(ANOMALIES, 0)})
            row["runs"].add(run.label)
            row["faults"] += done.get(kind, 0)
            for anomaly in ANOMALIES:
                row[anomaly] += counts.get(anomaly, 0)
    tail = (AFTER_LAST_HEAL, NO_WRITE)
    ordered = sorted(
        rows,
        key=lambda key: (
            version_sort_key(key[0]),
            key[1:3],
            key[3] in tail,
            tail.index(key[3]) if key[3] in tail else 0,
            key[3],
        ),
    )
    return [
        {"version": k[0], "sync_interval": k[1], "nodes": k[2], "fault": k[3], **rows[k], "runs": len(rows[k]["runs"])}
        for k in ordered
    ]


def schedule_text(run: DurabilityRun) -> str:
    """The faults as done: `kill-all (n1, n2, n3) at 7.4 s for 8.0 s; ...`, times from the first publish, each with
    its record's detail when it has one."""
    parts = []
    for fault in run.faults:
        at = (fault.start_ns - run.origin_ns) / 1e9
        held = (fault.healed_ns - fault.start_ns) / 1e9
        detail = f"; {fault.detail}" if fault.detail else ""
        parts.append(f"{fault.kind} ({', '.join(fault.nodes)}{detail}) at {at:.1f} s for {held:.1f} s")
    return redact_text("; ".join(parts)) or "no faults"


def leaders_text(changes: list[LeaderChange]) -> str:
    """Per kind of Raft group, how often its leader changed after the first one the samples showed:
    `meta 0, stream 2, consumer 1`."""
    if not changes:
        return "not sampled"
    per_kind = Counter(change.kind for change in changes)
    firsts = Counter(kind for kind, _group in {(c.kind, c.group) for c in changes})
    return ", ".join(f"{kind} {per_kind[kind] - firsts[kind]}" for kind in LEADER_KINDS if kind in per_kind)


def _shape(nodes: int, replicas: int) -> str:
    if not nodes:
        return "unknown"
    if replicas >= nodes:
        return f"{nodes}-node cluster, stream replicated on every node (R{nodes})"
    return f"{nodes}-node cluster, R{replicas} stream (on {replicas} of the {nodes} nodes)"


def run_facts(run: DurabilityRun) -> list[tuple[str, str]]:
    info = run.info
    server, options = info.get("server") or {}, info.get("options") or {}
    counts = info.get("counts") or {}
    version, sync_interval, nodes = run.setting
    facts = [
        ("seed", str(options.get("seed", "unknown"))),
        ("server", f"nats-server {version}" if version else "unknown"),
        ("nodes", _shape(nodes, int(server.get("replicas") or nodes))),
        ("sync_interval", sync_interval or "unknown"),
        (
            "workload",
            f"{options.get('duration_s', '?')} s, {counts.get('publishes', 0):,} publish attempts, "
            f"{run.acked:,} writes acknowledged, {run.unknown:,} unknown (timed out)",
        ),
        ("schedule", schedule_text(run)),
        ("leader changes", leaders_text(run.leader_changes)),
    ]
    if "recovery_s" in info:
        facts.append(("recovery", f"{info['recovery_s']} s after the last heal until a write was acknowledged"))
    if server.get("version") is None:
        facts.append(("note", "run.json names no server"))
    return [(name, redact_text(str(value))) for name, value in facts]


# --- the chart ----------------------------------------------------------------------------------------------------

# kills in reds, pauses in oranges, the rest (disk faults, partitions) in browns and greys: one shade per kind
FAULT_COLOURS = {
    "kill-all": "#b71c1c",
    "kill-leader": "#e53935",
    "kill-minority": "#f06292",
    "pause-leader": "#ef6c00",
    "pause-minority": "#fbc02d",
}
OTHER_FAULT_COLOURS = ("#6d4c41", "#757575", "#8d6e63", "#455a64")


def _fault_colour(kind: str, taken: int) -> str:
    return FAULT_COLOURS.get(kind, OTHER_FAULT_COLOURS[taken % len(OTHER_FAULT_COLOURS)])


def timeline(run: DurabilityRun) -> str:
    """Acknowledged writes / s above errors and unknowns / s, above each Raft group's leader changes, on one time
    axis, each fault's interval shaded in every panel and named above the top one (a PNG data URI)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.transforms import blended_transform_factory

    from jetcheck.reports.charts import PANEL_HEIGHT_IN, WIDTH_IN, _data_uri, _legend_outside

    seconds = np.arange(len(run.rates["acked"])) * BIN_S
    figure, (acked, failed, leaders) = plt.subplots(
        3, 1, figsize=(WIDTH_IN, PANEL_HEIGHT_IN * 2.6), sharex=True, height_ratios=(1, 1, 0.6)
    )
    acked.step(seconds, run.rates["acked"], where="post", color="#1565c0", label="acknowledged")
    failed.step(seconds, run.rates["errors"], where="post", color="#c62828", label="errors")
    failed.step(
        seconds, run.rates["unknown"], where="post", color="#6a1b9a", linestyle="--", label="unknown (timed out)"
    )
    _leader_changes(leaders, run)
    kinds: dict[str, str] = {}
    above = blended_transform_factory(acked.transData, acked.transAxes)
    for fault in run.faults:
        start, healed = ((at - run.origin_ns) / 1e9 for at in (fault.start_ns, fault.healed_ns))
        others = sum(kind not in FAULT_COLOURS for kind in kinds)
        colour = kinds.setdefault(fault.kind, _fault_colour(fault.kind, others))
        for axis in (acked, failed, leaders):
            axis.axvspan(start, healed, color=colour, alpha=0.15, linewidth=0)
        acked.text(start, 1.02, fault.kind, transform=above, fontsize=8, color=colour, rotation=20, va="bottom")
    for axis, title, unit in (
        (acked, "acknowledged writes per second", "writes / s"),
        (failed, "errors and unknowns per second", "publishes / s"),
    ):
        axis.set_ylabel(unit)
        axis.set_ylim(bottom=0)
        axis.grid(alpha=0.3)
        axis.set_title(title, loc="left", fontsize=10, pad=22 if axis is acked else 6)
        handles = axis.get_legend_handles_labels()[0]
        if axis is acked:
            handles += [Patch(color=colour, alpha=0.3, label=kind) for kind, colour in kinds.items()]
        _legend_outside(axis, handles)
    leaders.set_xlabel("seconds since the first publish (shaded: a fault, from when it was done until it was healed)")
    figure.tight_layout()
    return _data_uri(figure)


def _leader_changes(axis: Any, run: DurabilityRun) -> None:
    """One row per kind of Raft group; a mark where a sample first showed a group's leader or a new one, named by
    the node (its name's last part)."""
    rows = {kind: n for n, kind in enumerate(reversed(LEADER_KINDS))}
    for change in run.leader_changes:
        if change.kind not in rows:
            continue
        at, row = (change.at_ns - run.origin_ns) / 1e9, rows[change.kind]
        axis.plot([at], [row], marker="|", markersize=12, color="#37474f")
        axis.annotate(change.node.rsplit("-", 1)[-1], (at, row), xytext=(2, 4), textcoords="offset points", fontsize=7)
    axis.set_yticks(list(rows.values()), list(rows))
    axis.set_ylim(-0.6, len(rows) - 0.4)
    axis.grid(alpha=0.3, axis="x")
    title = "leader changes (each group's first leader, then every new one, from /raftz samples)"
    if not run.leader_changes:
        title += ": none sampled in this run"
    axis.set_title(title, loc="left", fontsize=10, pad=6)


# --- the view -----------------------------------------------------------------------------------------------------


def durability_view(runs: list[DurabilityRun]) -> dict[str, Any] | None:
    """The durability section as the templates draw it, or None when no input is a durability run."""
    if not runs:
        return None
    headers = ["server version", "sync_interval", "nodes", "fault kind", "runs", "faults", *ANOMALIES]
    rows = []
    for row in anomaly_rows(runs):
        cells = [Cell(row["version"]), Cell(row["sync_interval"]), Cell(number(row["nodes"]), "num")]
        cells += [Cell(row["fault"]), Cell(number(row["runs"]), "num"), Cell(number(row["faults"]), "num")]
        cells += [Cell(number(row[a]), "num fail" if row[a] else "num zero") for a in ANOMALIES]
        rows.append(cells)
    views = []
    for n, run in enumerate(runs):
        facts = Table(f"durability-run-{n}", ["", ""], [[Cell(k), Cell(v)] for k, v in run_facts(run)])
        views.append({"label": run.label, "facts": facts, "timeline": timeline(run)})
    return {"anomalies": Table("durability-anomalies", headers, rows), "runs": views}
