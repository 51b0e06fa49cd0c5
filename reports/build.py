"""`jetcheck report`'s work: resolve the inputs, aggregate (Spark for load logs), compare, write the report."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jetcheck.errors import ConfigError
from jetcheck.reports import compare
from jetcheck.reports.conformance_report import aggregate_conformance
from jetcheck.reports.durability_report import read_runs
from jetcheck.reports.inputs import REPORT_DIR, ResultSet, resolve, resolve_all
from jetcheck.reports.render import ReportContent, write_report
from jetcheck.verdict import RunVerdict, overall_exit_code

DEFAULT_OUT = "jetcheck-report"


@dataclass(frozen=True)
class ReportOutcome:
    index: Path
    regressions: int
    verdicts: list[RunVerdict] = field(default_factory=list)  # one per result set with conformance results

    @property
    def complete(self) -> bool:
        """Whether every result set's certify run finished (a load-only report has nothing unfinished)."""
        return all(verdict.complete for verdict in self.verdicts)

    @property
    def verdict_lines(self) -> list[str]:
        return [line for verdict in self.verdicts for line in verdict.lines()]

    def exit_code(self, strict: bool = True) -> int:
        """The conformance results' exit code, as `jetcheck certify` gives it (jetcheck.verdict)."""
        return overall_exit_code(self.verdicts, strict)


def default_out(result_sets: list[ResultSet]) -> Path:
    """A run folder's report goes into RUN/report; anything else into ./jetcheck-report."""
    if len(result_sets) == 1 and result_sets[0].kind == "run":
        return result_sets[0].root / REPORT_DIR
    return Path(DEFAULT_OUT)


def build_report(
    inputs: list[str],
    out: Path | None = None,
    baseline: str | None = None,
    master: str | None = None,
    spark=None,
    throughput_drop: float = compare.THROUGHPUT_DROP,
    p99_rise: float = compare.P99_RISE,
    resolved: tuple[list[ResultSet], ResultSet | None] | None = None,
) -> ReportOutcome:
    """Aggregate `inputs` (and `baseline`) and write index.html, summary.md and tables/ into `out`. `resolved`:
    their result sets and the baseline's, resolved already (and read by `inputs.check`), so no file is read twice."""
    if not inputs:
        raise ConfigError("report needs at least one --in DIR")
    result_sets, base = resolved or (resolve_all(inputs), resolve(baseline) if baseline else None)
    if base is not None and len(result_sets) != 1:
        raise ConfigError("--baseline compares one run: give exactly one --in with it")
    out = Path(out) if out else default_out(result_sets)
    conformance = aggregate_conformance(result_sets)
    loads, base_load = [], None
    with_load = [rs for rs in result_sets if rs.load is not None]
    if with_load or (base is not None and base.load is not None):
        from jetcheck.reports.load_report import aggregate_load
        from jetcheck.reports.spark import spark_session

        sets = [*with_load, *([base] if base is not None and base.load is not None else [])]
        log_bytes = sum(path.stat().st_size for rs in sets for path in rs.op_files())
        with spark_session(master, spark, log_bytes) as session:
            loads = [aggregate_load(session, rs) for rs in with_load]
            if base is not None and base.load is not None:
                base_load = aggregate_load(session, base)
    comparison = None
    if base is not None:
        comparison = compare.Comparison(
            baseline=str(baseline),
            load=compare.compare_load(loads[0] if loads else None, base_load, throughput_drop, p99_rise),
            conformance=compare.compare_conformance(conformance, aggregate_conformance([base])),
        )
    content = ReportContent(
        inputs=[str(i) for i in inputs],
        conformance=conformance,
        loads=loads,
        comparison=comparison,
        durability=read_runs(result_sets),
    )
    index = write_report(content, out)
    return ReportOutcome(index, comparison.regressions if comparison else 0, conformance.verdicts)
