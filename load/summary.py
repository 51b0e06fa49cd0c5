"""A quick, exact summary of one load run read back from its op log, and the no-lost-records check.

(The full reports are jetcheck.reports, on Spark; this is what `jetcheck load` prints when it finishes.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from jetcheck.records import OPS_DIR, shared_loop_note

from . import runfile
from .scenarios import BATCH_SIZE
from .window import SteadyWindow, steady_window

QUANTILES = (0.5, 0.9, 0.99, 0.999)
COLUMNS = ["user", "process", "op", "ok", "error_class", "intended_ns", "start_ns", "end_ns", "e2e_ns"]


def read_ops(out_dir: Path, columns: list[str] | None = None):
    """Every finished op-log file of the run as one Arrow table."""
    import pyarrow as pa
    import pyarrow.dataset as ds

    from jetcheck.records import OP_FIELDS, arrow_schema

    schema = arrow_schema(OP_FIELDS)
    ops_dir = Path(out_dir) / OPS_DIR
    if not ops_dir.is_dir():  # nothing was logged at all
        return pa.table({name: pa.array([], schema.field(name).type) for name in columns or COLUMNS})
    return ds.dataset(ops_dir, format="parquet", schema=schema).to_table(columns=columns or COLUMNS)


def _quantiles_us(values) -> dict[str, float]:
    import pyarrow.compute as pc

    if len(values) == 0:
        return {}
    qs = pc.quantile(values, q=list(QUANTILES), interpolation="nearest").to_pylist()
    shown = {f"p{q * 100:g}": v / 1000 for q, v in zip(QUANTILES, qs, strict=True)}
    shown["max"] = pc.max(values).as_py() / 1000
    return shown


def user_spans(table) -> list[tuple[int, int]]:
    """Each user's (first, last) actual send time; users are numbered per process."""
    spans = table.group_by(["process", "user"]).aggregate([("start_ns", "min"), ("start_ns", "max")])
    return list(zip(spans["start_ns_min"].to_pylist(), spans["start_ns_max"].to_pylist(), strict=True))


def summarize(out_dir: Path) -> dict[str, Any]:
    """Per op kind: counts over the whole run; rate and response/service/send-delay/e2e quantiles (microseconds) of
    the operations sent in the steady window (jetcheck.load.window), which `window` describes."""
    import pyarrow.compute as pc

    table = read_ops(out_dir)
    window = steady_window(user_spans(table))
    sent = table["start_ns"].to_numpy()
    steady_table = table.filter(window.contains(sent)) if window else table  # no window: nothing logged
    ops: dict[str, Any] = {}
    for op in sorted(set(table.column("op").to_pylist())):
        rows = table.filter(pc.equal(table["op"], op))
        errors = rows.filter(pc.invert(rows["ok"]))
        by_class: dict[str, int] = {}
        for name in errors["error_class"].to_pylist():
            by_class[name] = by_class.get(name, 0) + 1
        entry: dict[str, Any] = {
            "count": rows.num_rows,
            "ok": pc.sum(rows["ok"]).as_py() or 0,
            "errors": by_class,
            "overflow": by_class.get("Overflow", 0),
        }
        steady = steady_table.filter(pc.equal(steady_table["op"], op))
        ok = steady.filter(steady["ok"])
        entry["steady_ok"] = ok.num_rows
        if ok.num_rows:
            entry["rate_per_s"] = ok.num_rows / window.seconds
            entry["response_us"] = _quantiles_us(pc.subtract(ok["end_ns"], ok["intended_ns"]))
            entry["service_us"] = _quantiles_us(pc.subtract(ok["end_ns"], ok["start_ns"]))
            entry["send_delay_us"] = _quantiles_us(pc.subtract(ok["start_ns"], ok["intended_ns"]))
            e2e = ok.filter(pc.greater_equal(ok["e2e_ns"], 0))["e2e_ns"]
            if len(e2e):
                entry["e2e_us"] = _quantiles_us(e2e)
        ops[op] = entry
    run = runfile.read(out_dir)
    note = shared_loop_note(run)
    return {
        "rows": table.num_rows,
        "window": describe_window(window, sent) if window else None,
        "ops": ops,
        "checks": record_checks(run, table),
        "notes": [note] if note else [],
    }


def describe_window(window: SteadyWindow, start_ns) -> dict[str, Any]:
    before = int((start_ns < window.start_ns).sum())
    after = int((start_ns >= window.end_ns).sum())
    return window.describe(before, len(start_ns) - before - after, after)


def record_checks(run: dict[str, Any], table) -> list[dict[str, Any]]:
    """The op log against what the server stored: nothing lost, nothing invented."""
    import pyarrow.compute as pc

    server = run.get("server") or {}
    stream = server.get("stream") or {}
    checks: list[dict[str, Any]] = []

    def ok_rows(op: str) -> int:
        return table.filter(pc.and_(pc.equal(table["op"], op), table["ok"])).num_rows

    def check(name: str, logged: int, stored: Any) -> None:
        checks.append({"check": name, "logged": logged, "server": stored, "pass": logged == stored})

    if workers := run.get("workers"):  # a fleet: a worker whose log did not arrive whole makes the run incomplete
        whole = [w["worker"] for w in workers if w["complete"]]
        missing = ", ".join(f"{w['worker']} ({'; '.join(w['errors'])})" for w in workers if not w["complete"])
        name = "every worker's log arrived whole" + (f": incomplete run, missing {missing}" if missing else "")
        checks.append(
            {
                "check": name,
                "logged": len(whole),
                "server": len(workers),
                "pass": len(whole) == len(workers),
            }
        )
    if not stream:
        checks.append({"check": "server counts read", "pass": False, "server": server.get("error", "missing")})
        return checks
    if table.num_rows == 0:  # no user ran (a driver that died at start): 0 == 0 below would pass
        checks.append({"check": "operations logged", "logged": 0, "server": "-", "pass": False})
    prefill = server.get("prefill", 0)
    scenario = run["scenario"]
    if scenario == "kv":
        check("kv_put rows == KV stream last_seq", ok_rows("kv_put"), stream["last_seq"])
    elif scenario == "batch-publish":  # one row per committed batch
        check(f"publish rows x {BATCH_SIZE} == stream messages", ok_rows("publish") * BATCH_SIZE, stream["messages"])
    elif ok_rows("publish") or scenario.startswith("publish") or scenario in ("mixed", "end-to-end"):
        check("publish rows == stream messages", ok_rows("publish"), stream["messages"] - prefill)
    if scenario == "counter":  # each acked increment added one to its subject's counter
        check("publish rows == sum of counter values", ok_rows("publish"), (server.get("counter") or {}).get("total"))
    consumer = server.get("consumer")
    if consumer:
        # a pull that expired on the client while the server was delivering leaves messages delivered but not
        # consumed: they stay ack-pending (redelivered later), so the log must match the acknowledged ones
        acked = consumer["delivered"] - consumer["num_ack_pending"]
        check("consume rows == acknowledged deliveries", ok_rows("consume"), acked)
    if scenario == "ordered-consume":
        consumed = table.filter(pc.equal(table["op"], "consume"))
        per_user = pc.value_counts(
            pc.binary_join_element_wise(
                pc.cast(consumed["process"], "string"), pc.cast(consumed["user"], "string"), "/"
            )
        ).to_pylist()
        for item in per_user:
            check(f"ordered user {item['values']} read the stream", item["counts"], stream["messages"])
    return checks


def format_summary(run: dict[str, Any], summary: dict[str, Any]) -> str:
    lines = [
        f"run {run['run_id']}: {run['scenario']} ({run['mode']} loop"
        + (f", target {run['rate']:g} ops/s" if run.get("rate") else "")
        + f"), {run['users']} users in {run['processes']} process(es), nats-server {run['server_version']}"
    ]
    if summary.get("window"):
        lines.append("  " + summary["window"]["definition"])
    for op, entry in summary["ops"].items():
        line = f"  {op:8} ok {entry['ok']:>9}  errors {sum(entry['errors'].values()):>6}"
        if "rate_per_s" in entry:
            line += f"  steady {entry['rate_per_s']:>10.1f}/s"
        lines.append(line)
        for key in ("response_us", "service_us", "send_delay_us", "e2e_us"):
            if key in entry:
                figures = "  ".join(f"{k} {v:,.1f}" for k, v in entry[key].items())
                lines.append(f"           {key:14} {figures}")
        if entry["errors"]:
            lines.append("           errors: " + ", ".join(f"{k} x{v}" for k, v in entry["errors"].items()))
    for worker in run.get("workers") or []:
        clock = worker.get("clock") or {}
        offset = (clock.get("start") or {}).get("offset_ns")
        lines.append(
            f"  worker {worker['worker']:14} pid {worker['pid']}  ops {worker['rows_received']:>9}"
            + (f"  clock offset {offset / 1e6:+.3f} ms ± {clock['bound_ns'] / 1e6:.3f}" if offset is not None else "")
            + ("" if worker["complete"] else "  INCOMPLETE")
        )
    for item in summary["checks"]:
        mark = "ok  " if item["pass"] else "FAIL"
        lines.append(f"  [{mark}] {item['check']}: log {item.get('logged', '-')}, server {item['server']}")
    lines.extend(f"  [note] {note}" for note in summary.get("notes", []))
    return "\n".join(lines)
