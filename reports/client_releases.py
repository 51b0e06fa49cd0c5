"""Client rules by client release: one grid per client (its rules down, its releases across), grouped by area, for a
report over several clients or releases (`jetcheck matrix --clients`, a sweep of `certify --client X@version`).

A flat rule x column matrix of 5 clients with 10 releases each is 50 columns wide; here each client is a grid of
its own, each area of it folds away, and the areas where a status changes between releases open first.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from jetcheck.verdict import FAILING, worst_status
from jetcheck.versions import version_sort_key

MESSAGE_CHARS = 300  # a cell's tooltip: the start of the check's message


def _release_key(label: str) -> tuple:
    release, _, server = label.partition(" · server ")
    return (version_sort_key(release), version_sort_key(server) if server else ())


def client_release_grids(results: pd.DataFrame) -> list[dict[str, Any]]:
    """One grid per client name (a `+variant` is a client of its own): columns are its releases (with the server
    release when several servers ran), oldest first; a cell is the worst status of the rule's checks there."""
    own = results[(results["subject"] == "client") & (results["client"] != "")]
    if own.empty:
        return []
    name_release = own["client"].str.rsplit(" ", n=1)
    own = own.assign(name=name_release.str[0], release=name_release.str[-1])
    several_servers = own["server_version"].nunique() > 1
    own = own.assign(column=own["release"] + (" · server " + own["server_version"] if several_servers else ""))
    grids = []
    for name, mine in own.groupby("name", sort=True):
        columns = sorted(mine["column"].unique(), key=_release_key)
        cells = mine.groupby(["id", "column"])["status"].agg(worst_status)
        messages = mine.groupby(["id", "column"])["message"].agg(lambda ms: next((m for m in ms if m), ""))
        rules = mine.drop_duplicates("id").set_index("id")
        areas = []
        for area, ids in rules.groupby("area").groups.items():
            rows = []
            for rule in sorted(ids):
                statuses = [cells.get((rule, c), "") for c in columns]
                rows.append(
                    {
                        "id": rule,
                        "level": rules.at[rule, "level"],
                        "title": rules.at[rule, "title"],
                        "cells": [
                            {"status": s, "message": messages.get((rule, c), "")[:MESSAGE_CHARS]}
                            for s, c in zip(statuses, columns, strict=True)
                        ],
                        "changed": len({s for s in statuses if s}) > 1,
                    }
                )
            changed = sum(row["changed"] for row in rows)
            failing = any(cell["status"] in FAILING for row in rows for cell in row["cells"])
            # one release has nothing to change: its failing areas are the ones to read first
            opened = bool(changed) or (len(columns) == 1 and failing)
            areas.append({"area": area, "rows": rows, "changed": changed, "open": opened})
        counts = []
        for column in columns:
            here = cells[cells.index.get_level_values("column") == column].value_counts()
            counts.append(" / ".join(f"{here.get(s, 0)}" for s in ("pass", "fail", "na")))
        grids.append(
            {
                "name": name,
                "columns": columns,
                "counts": counts,
                "areas": sorted(areas, key=lambda a: (-a["changed"], not a["open"], a["area"])),
                "changed": sum(a["changed"] for a in areas),
                "rules": len(rules),
            }
        )
    return grids
