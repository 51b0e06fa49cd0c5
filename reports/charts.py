"""Charts as PNG data URIs (matplotlib, Agg backend): the HTML report embeds them and loads nothing else.

Every plot keeps its legend outside the plotting area and draws at most MAX_SERIES lines: more operations than
fit get more panels, not a crowded one.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from matplotlib.ticker import FuncFormatter, NullFormatter

from jetcheck.reports.load_report import GROUP, LoadTables

STATUS_COLOURS = {
    "pass": "#2e7d32",
    "fail": "#c62828",
    "error": "#ef6c00",
    "disagree": "#6a1b9a",
    "na": "#9e9e9e",
    "skip": "#bdbdbd",
}
MAX_SERIES = 4
WIDTH_IN = 10.5
PANEL_HEIGHT_IN = 2.6
# percentile ticks on the 1/(1-q) axis: position -> label
PERCENTILE_TICKS = {
    1: "0%",
    2: "50%",
    10: "90%",
    100: "99%",
    1_000: "99.9%",
    10_000: "99.99%",
    100_000: "99.999%",
    1_000_000: "99.9999%",
}


def _data_uri(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _legend_outside(axis, handles=None, anchor_x: float = 1.01) -> None:
    """The legend to the right of the plotting area, where it covers no data."""
    handles = handles or axis.get_legend_handles_labels()[0]
    if handles:
        labels = [handle.get_label() for handle in handles]
        axis.legend(handles, labels, loc="upper left", bbox_to_anchor=(anchor_x, 1.0), fontsize=9, frameon=False)


PLAIN_NUMBERS = FuncFormatter(lambda value, _: f"{value:g}")  # 0.1, 1, 10 rather than 10^-1, 10^0, 10^1


def _log_scale(axis) -> None:
    """A logarithmic y axis (call it once the data are drawn) labelled 0.1, 1, 10; the values in between are
    labelled too when the data span less than a factor of 20, which would show one labelled tick or none."""
    axis.set_yscale("log")
    low, high = axis.get_ylim()
    axis.yaxis.set_major_formatter(PLAIN_NUMBERS)
    axis.yaxis.set_minor_formatter(PLAIN_NUMBERS if high / max(low, 1e-12) < 20 else NullFormatter())


def _colours(load: LoadTables) -> dict[tuple, str]:
    """One colour per (scenario, operation), the same in every panel and chart of a load run."""
    keys = sorted({keys for frame in (load.throughput, load.latency) for keys, _ in _groups(frame)})
    return {keys: f"C{n % 10}" for n, keys in enumerate(keys)}


def _op_name(keys, several_scenarios: bool) -> str:
    scenario, op = keys
    return f"{scenario}/{op}" if several_scenarios else str(op)


def _groups(frame: pd.DataFrame) -> list[tuple[tuple, pd.DataFrame]]:
    return [(keys, group) for keys, group in frame.groupby(list(GROUP))] if not frame.empty else []


def _chunks(items: list, size: int) -> list[list]:
    return [items[i : i + size] for i in range(0, len(items), size)] or [[]]


Panel = Callable[[plt.Axes], None]


def _throughput_panels(load: LoadTables, several: bool) -> list[tuple[str, Panel]]:
    colours = _colours(load)
    series = []
    for keys, group in _groups(load.throughput):
        name = _op_name(keys, several)
        series.append((f"{name} ok", group["t_s"], group["ok"], "-", colours[keys]))
        if group["errors"].any():
            series.append((f"{name} errors", group["t_s"], group["errors"], ":", colours[keys]))
    panels = []
    for part in _chunks(series, MAX_SERIES):

        def draw(axis, part=part):
            for label, x, y, style, colour in part:
                axis.plot(x, y, linestyle=style, color=colour, label=label)
            axis.set_ylabel("operations / s")

        panels.append(("throughput (operations completed per second)", draw))
    return panels


def _percentile_panels(load: LoadTables, metric: str, columns: tuple[str, ...], what: str, unit: str, several: bool):
    """Per-interval percentiles of one metric: each operation's `columns` in one colour, ≤ MAX_SERIES lines."""
    over_time = load.latency_over_time
    if over_time.empty:
        return []
    # an operation whose values are all zero (a delivery has no send delay) would draw nothing on a log axis
    groups = [(k, g) for k, g in _groups(over_time[over_time["metric"] == metric]) if g[list(columns)].any().any()]
    per_panel = max(1, MAX_SERIES // len(columns))
    colours = _colours(load)
    panels = []
    styles = ("-", "--", ":")
    for part in _chunks(groups, per_panel):
        if not part:
            continue

        def draw(axis, part=part):
            for keys, group in part:
                for column, style in zip(columns, styles, strict=False):
                    label = f"{_op_name(keys, several)} {column.replace('_', '.')}"
                    axis.plot(group["t_s"], group[column] / 1e6, linestyle=style, color=colours[keys], label=label)
            axis.set_ylabel(unit)
            _log_scale(axis)

        panels.append((f"{what} per {load.slot_s:g} s interval", draw))
    return panels


def _errors_panel(load: LoadTables) -> list[tuple[str, Panel]]:
    if load.errors.empty:
        return []  # the report says "no errors" in words; an empty chart says nothing
    per_class = load.errors.pivot_table(index="t_s", columns="error_class", values="count", aggfunc="sum", fill_value=0)

    def draw(axis):
        bottom = np.zeros(len(per_class))
        for name in per_class.columns[: MAX_SERIES * 2]:
            axis.bar(per_class.index, per_class[name], bottom=bottom, width=1.0, label=name, align="edge")
            bottom += per_class[name].to_numpy()
        axis.set_ylabel("errors / s")

    return [("errors by class", draw)]


def _server_panels(load: LoadTables) -> list[tuple[str, Panel]]:
    samples = load.samples
    if samples.empty or "cpu" not in samples:
        return []

    def cpu_and_memory(axis):
        axis.plot(samples["t_s"], samples["cpu"], color="#6a1b9a", label="CPU %")
        axis.set_ylabel("CPU %")
        memory = axis.twinx()
        memory.plot(samples["t_s"], samples["mem"] / 2**20, color="#00838f", label="memory MiB")
        memory.set_ylabel("memory, MiB")
        handles = [*axis.get_legend_handles_labels()[0], *memory.get_legend_handles_labels()[0]]
        _legend_outside(axis, handles, anchor_x=1.09)  # beyond the memory axis' labels

    def messages(axis):
        for name in ("in_msgs_rate", "out_msgs_rate"):
            if name in samples:
                axis.plot(samples["t_s"], samples[name], label=f"{name.replace('_msgs_rate', '')} msgs / s")
        axis.set_ylabel("messages / s")

    panels = [("server CPU and memory (/varz)", cpu_and_memory)]
    if {"in_msgs_rate", "out_msgs_rate"} & set(samples.columns):
        panels.append(("server messages (/varz)", messages))
    return panels


def timeline(load: LoadTables) -> str:
    """Throughput, response time, send delay, errors (when any) and server samples on one time axis (seconds)."""
    several = load.totals["scenario"].nunique() > 1 if not load.totals.empty else False
    panels = [
        *_throughput_panels(load, several),
        *_percentile_panels(load, "response", ("p50", "p99"), "response time", "ms", several),
        *_percentile_panels(load, "send_delay", ("p99",), "send delay (actual - intended send), p99", "ms", several),
        *_errors_panel(load),
        *_server_panels(load),
    ]
    figure, axes = plt.subplots(
        len(panels), 1, figsize=(WIDTH_IN, PANEL_HEIGHT_IN * len(panels)), sharex=True, squeeze=False
    )
    window = getattr(load, "window", None) or {}  # the steady window, when the aggregation measured one
    for n, (axis, (title, draw)) in enumerate(zip(axes[:, 0], panels, strict=True)):
        draw(axis)
        if window.get("start_ns") and not window.get("whole_run"):
            start, end = ((window[key] - load.origin_ns) / 1e9 for key in ("start_ns", "end_ns"))
            axis.axvspan(start, end, color="#9e9e9e", alpha=0.12, label="steady window" if n == 0 else None)
        axis.set_title(title, loc="left", fontsize=10)
        axis.grid(alpha=0.3)
        if axis.get_legend() is None:
            _legend_outside(axis)
    axes[-1, 0].set_xlabel(f"seconds since the run started ({load.span_s:.1f} s)")
    figure.tight_layout()
    return _data_uri(figure)


def offered_vs_achieved(load: LoadTables) -> str:
    """Per operation of the whole fleet: the operations offered per second (by intended send), the successful ones
    per second (by completion) and, in an open loop, the target rate."""
    several = load.totals["scenario"].nunique() > 1 if not load.totals.empty else False
    groups = _groups(load.offered)[:MAX_SERIES]
    achieved = dict(_groups(load.throughput))
    target = load.info.get("rate")
    figure, axes = plt.subplots(
        len(groups), 1, figsize=(WIDTH_IN, PANEL_HEIGHT_IN * len(groups)), sharex=True, squeeze=False
    )
    for axis, (keys, offered) in zip(axes[:, 0], groups, strict=True):
        axis.plot(offered["t_s"], offered["offered"], linestyle="--", color="C0", label="offered (intended sends)")
        if keys in achieved:
            done = achieved[keys]
            axis.plot(done["t_s"], done["ok"], color="C2", label="achieved (ok completions)")
        if isinstance(target, (int, float)) and target > 0 and keys[1] == "publish":
            axis.axhline(target, color="#9e9e9e", linestyle=":", label=f"target {target:g} / s")
        axis.set_title(f"{_op_name(keys, several)}: offered and achieved, whole fleet", loc="left", fontsize=10)
        axis.set_ylabel("operations / s")
        axis.grid(alpha=0.3)
        _legend_outside(axis)
    axes[-1, 0].set_xlabel(f"seconds since the run started ({load.span_s:.1f} s)")
    figure.tight_layout()
    return _data_uri(figure)


def distribution(load: LoadTables) -> str:
    """Latency by percentile (HdrHistogram style) on a 1/(1-q) axis that ends where the samples do: with n
    samples the highest percentile shown is 1 - 1/n."""
    counts = load.latency.set_index([*GROUP, "metric"])["count"] if not load.latency.empty else pd.Series(dtype=int)
    frame = load.distribution[load.distribution["metric"].isin(("response", "e2e"))]
    several = load.totals["scenario"].nunique() > 1 if not load.totals.empty else False
    colours = _colours(load)
    series = []
    for (scenario, op, metric), group in frame.groupby([*GROUP, "metric"]):
        samples = int(counts.get((scenario, op, metric), 0))
        if samples < 2:
            continue
        group = group[group["quantile"] <= 1 - 1 / samples].sort_values("quantile")
        name = f"{_op_name((scenario, op), several)} {'end-to-end' if metric == 'e2e' else 'response'}"
        style = ":" if metric == "e2e" else "-"
        series.append(
            (name, 1 / (1 - group["quantile"]), group["value_ns"] / 1e6, samples, colours[(scenario, op)], style)
        )
    parts = _chunks(series, MAX_SERIES)
    figure, axes = plt.subplots(len(parts), 1, figsize=(WIDTH_IN, 4.2 * len(parts)), squeeze=False)
    for axis, part in zip(axes[:, 0], parts, strict=True):
        for name, x, y, _, colour, style in part:
            axis.plot(x, y, marker=".", color=colour, linestyle=style, label=name)
        most = max((item[3] for item in part), default=2)
        ticks = {at: label for at, label in PERCENTILE_TICKS.items() if at <= most}
        axis.set_xscale("log")
        _log_scale(axis)
        axis.set_xticks(list(ticks), list(ticks.values()))
        axis.minorticks_off()
        axis.set_xlim(1, most)
        axis.set_xlabel(f"percentile (a line ends at 1 - 1/n for its n samples; here n ≤ {most:,})")
        axis.set_ylabel("latency, ms")
        axis.grid(alpha=0.3, which="both")
        _legend_outside(axis)
    steady = (getattr(load, "window", None) or {}).get("whole_run") is False
    axes[0, 0].set_title(f"latency by percentile{' (steady window)' if steady else ''}", loc="left", fontsize=10)
    figure.tight_layout()
    return _data_uri(figure)


def conformance_bars(summary: pd.DataFrame) -> str:
    """Check counts by status per area (and result set when there are several)."""
    statuses = [s for s in STATUS_COLOURS if s in summary.columns]
    per_area = summary.groupby(["result_set", "area"])[statuses].sum()
    several = summary["result_set"].nunique() > 1
    labels = [f"{rs}: {area}" if several else area for rs, area in per_area.index]
    figure, axis = plt.subplots(figsize=(WIDTH_IN, max(2.5, 0.3 * len(labels) + 1)))
    left = np.zeros(len(per_area))
    for status in statuses:
        if per_area[status].any():
            axis.barh(labels, per_area[status], left=left, color=STATUS_COLOURS[status], label=status)
        left += per_area[status].to_numpy()
    axis.invert_yaxis()
    axis.set_xlabel("checks")
    axis.set_title("checks by area and status", loc="left", fontsize=10)
    _legend_outside(axis)
    figure.tight_layout()
    return _data_uri(figure)
