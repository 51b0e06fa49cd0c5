"""The report's tables as the templates draw them (Table, Cell) and the formatting of every value in them: shared by
every part of the report's view (render, conformance_view, load_view, durability_report, client_comparison)."""

from __future__ import annotations

import datetime as dt
import numbers
from dataclasses import dataclass
from typing import Any

import pandas as pd

STATUS_HEADERS = {
    "pass": "pass",
    "fail": "fail",
    "error": "error",
    "disagree": "documents disagree",
    "na": "n/a",
    "skip": "skipped",
}
NS = 1_000_000_000


@dataclass(frozen=True)
class Cell:
    text: str
    css: str = ""  # a status ("pass", "fail", ...) or "num"


@dataclass
class Table:
    """A table as the templates draw it: every cell already formatted as text."""

    id: str
    headers: list[str]
    rows: list[list[Cell]]

    @property
    def numeric(self) -> list[bool]:
        """Per column: whether it holds numbers (right-aligned in HTML and Markdown)."""
        return [
            all("num" in row[i].css.split() or not row[i].text for row in self.rows) for i in range(len(self.headers))
        ]


# --- formatting ---------------------------------------------------------------------------------------------------


def number(value: Any) -> str:
    """A count with thousands separators; other numbers with three significant digits (more when larger)."""
    if value is None or (isinstance(value, float) and pd.isna(value)):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, numbers.Integral) or (isinstance(value, float) and value.is_integer() and abs(value) >= 1):
        return f"{int(value):,}"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def milliseconds(value_ns: float) -> str:
    """A latency in ms with as many decimals as its size calls for; never scientific notation."""
    value = value_ns / 1e6
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    if value >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}" if value >= 0.001 or value == 0 else "<0.001"


def when(value: Any) -> str:
    """An instant as an ISO date in UTC: from wall-clock ns, seconds or an ISO string; "" when unknown."""
    try:
        if isinstance(value, str):
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        elif isinstance(value, numbers.Real) and value > 0:
            moment = dt.datetime.fromtimestamp(value / NS if value > 1e14 else value, dt.UTC)
        else:
            return ""
    except ValueError:
        return str(value)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def seconds(value: Any) -> str:
    return f"{number(value)} s"


def cell(value: Any, css: str = "") -> Cell:
    if isinstance(value, numbers.Number) and not isinstance(value, bool):
        return Cell(number(value), css or "num")
    return Cell("" if value is None else str(value), css)


def plural(count: int, word: str) -> str:
    if count == 1:
        return f"{count:,} {word}"
    return (
        f"{count:,} {word[:-1]}ies" if word.endswith("y") else f"{count:,} {word}{'es' if word.endswith('s') else 's'}"
    )


def frame_table(table_id: str, frame: pd.DataFrame, headers: dict[str, str] | None = None) -> Table:
    """A DataFrame as a Table: numbers formatted, statuses coloured, columns renamed by `headers`."""
    headers = headers or {}
    rows = []
    for record in frame.to_dict("records"):
        cells = []
        for value in record.values():
            css = value if isinstance(value, str) and value in (*STATUS_HEADERS, "regression", "fixed") else ""
            if isinstance(value, bool):
                css, value = ("regression", "yes") if value else ("", "")
            cells.append(cell(value, css))
        rows.append(cells)
    return Table(table_id, [headers.get(c, c.replace("_", " ")) for c in frame.columns], rows)
