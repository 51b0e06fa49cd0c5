"""What a report is made of: the read results, the load tables, a comparison, notes and durability runs."""

from __future__ import annotations

from dataclasses import dataclass, field

from jetcheck.reports.compare import Comparison
from jetcheck.reports.conformance_report import ConformanceTables
from jetcheck.reports.load_report import LoadTables


@dataclass
class ReportContent:
    inputs: list[str]
    conformance: ConformanceTables
    loads: list[LoadTables]
    comparison: Comparison | None = None
    notes: list[str] = field(default_factory=list)
    durability: list = field(default_factory=list)  # jetcheck.reports.durability_report.DurabilityRun, one per run
