"""Charts as PNG data URIs (matplotlib, Agg backend): the HTML report embeds them and loads nothing else."""

from __future__ import annotations

import base64
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from jetcheck.reports.load_report import GROUP, LoadTables

STATUS_COLOURS = {"pass": "#2e7d32", "fail": "#c62828", "error": "#ef6c00", "na": "#9e9e9e", "skip": "#bdbdbd"}


def _data_uri(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(figure)
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _series_label(row_keys) -> str:
    return "/".join(str(k) for k in row_keys)


def timeline(load: LoadTables) -> str:
    """Throughput, latency, send delay, errors and server samples on one shared time axis (seconds)."""
    figure, axes = plt.subplots(6, 1, figsize=(11, 15), sharex=True)
    tp, lat, delay, err, cpu, msgs = axes
    for keys, group in load.throughput.groupby(list(GROUP)):
        tp.plot(group["t_s"], group["ok"], label=f"{_series_label(keys)} ok/s")
        if group["errors"].any():
            tp.plot(group["t_s"], group["errors"], linestyle=":", label=f"{_series_label(keys)} errors/s")
    tp.set_ylabel("operations / s")
    tp.set_title(f"{load.label}: throughput (by completion second)")
    over_time = load.latency_over_time
    for keys, group in over_time[over_time["metric"] == "response"].groupby(list(GROUP)):
        for column, style in (("p50", "-"), ("p99", "--"), ("p99_9", ":")):
            lat.plot(group["t_s"], group[column] / 1e6, linestyle=style, label=f"{_series_label(keys)} {column}")
    lat.set_ylabel("response time, ms")
    lat.set_title(f"response time per {load.slot_s:g} s interval")
    for keys, group in over_time[over_time["metric"] == "send_delay"].groupby(list(GROUP)):
        delay.plot(group["t_s"], group["p99"] / 1e6, label=f"{_series_label(keys)} p99")
        delay.plot(group["t_s"], group["max"] / 1e6, linestyle=":", label=f"{_series_label(keys)} max")
    delay.set_ylabel("send delay, ms")
    delay.set_title("send delay (actual - intended send)")
    for axis in (lat, delay):
        if axis.lines:
            axis.set_yscale("log")
    if not load.errors.empty:
        per_class = load.errors.pivot_table(
            index="t_s", columns="error_class", values="count", aggfunc="sum", fill_value=0
        )
        bottom = np.zeros(len(per_class))
        for name in per_class.columns:
            err.bar(per_class.index, per_class[name], bottom=bottom, width=1.0, label=name, align="edge")
            bottom += per_class[name].to_numpy()
    else:
        err.text(0.5, 0.5, "no errors", transform=err.transAxes, ha="center", va="center")
    err.set_ylabel("errors / s")
    err.set_title("errors by class")
    samples = load.samples
    if not samples.empty and "cpu" in samples:
        cpu.plot(samples["t_s"], samples["cpu"], color="#6a1b9a", label="server CPU %")
        cpu.set_ylabel("CPU %")
        memory = cpu.twinx()
        memory.plot(samples["t_s"], samples["mem"] / 2**20, color="#00838f", label="server memory MiB")
        memory.set_ylabel("memory, MiB")
        memory.legend(loc="upper right", fontsize=7)
        for name in ("in_msgs_rate", "out_msgs_rate"):
            if name in samples:
                msgs.plot(samples["t_s"], samples[name], label=f"server {name.replace('_rate', '')}/s")
        msgs.set_ylabel("messages / s")
    else:
        cpu.text(0.5, 0.5, "no server samples", transform=cpu.transAxes, ha="center", va="center")
    cpu.set_title("server samples (/varz)")
    msgs.set_xlabel(f"seconds since the run started ({load.span_s:.1f} s)")
    for axis in axes:
        axis.grid(alpha=0.3)
        if axis.get_legend_handles_labels()[0]:
            axis.legend(loc="upper left", fontsize=7, ncol=3)
    return _data_uri(figure)


def distribution(load: LoadTables) -> str:
    """Latency by percentile (HdrHistogram style): the tail is spread out on a 1/(1-q) axis."""
    figure, axis = plt.subplots(figsize=(11, 5))
    frame = load.distribution[load.distribution["metric"] != "send_delay"]
    for keys, group in frame.groupby([*GROUP, "metric"]):
        group = group.sort_values("quantile")
        x = 1 / (1 - group["quantile"].clip(upper=0.999999))
        axis.plot(x, group["value_ns"] / 1e6, marker=".", label=_series_label(keys))
    axis.set_xscale("log")
    axis.set_yscale("log")
    ticks = [1, 2, 10, 100, 1_000, 10_000, 100_000, 1_000_000]
    axis.set_xticks(ticks, ["0%", "50%", "90%", "99%", "99.9%", "99.99%", "99.999%", "99.9999%"])
    axis.set_xlabel("percentile")
    axis.set_ylabel("latency, ms")
    axis.set_title(f"{load.label}: latency by percentile")
    axis.grid(alpha=0.3, which="both")
    axis.legend(fontsize=7, ncol=2)
    return _data_uri(figure)


def conformance_bars(summary: pd.DataFrame) -> str:
    """Status counts per area (and result set when there are several)."""
    statuses = [s for s in STATUS_COLOURS if s in summary.columns]
    per_area = summary.groupby(["result_set", "area"])[statuses].sum()
    several = summary["result_set"].nunique() > 1
    labels = [f"{rs}: {area}" if several else area for rs, area in per_area.index]
    figure, axis = plt.subplots(figsize=(11, max(2.5, 0.35 * len(labels) + 1)))
    left = np.zeros(len(per_area))
    for status in statuses:
        axis.barh(labels, per_area[status], left=left, color=STATUS_COLOURS[status], label=status)
        left += per_area[status].to_numpy()
    axis.invert_yaxis()
    axis.set_xlabel("rules")
    axis.set_title("conformance by area")
    axis.legend(fontsize=8, ncol=len(statuses))
    return _data_uri(figure)
