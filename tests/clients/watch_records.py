"""Reading the watch records a driver streamed (protocol v3), for the tests of both drivers."""

from __future__ import annotations

import base64

WATCH_DEFAULTS = {"keys": [">"], "include_history": False, "updates_only": False, "ignore_deletes": False,
                  "meta_only": False}  # fmt: skip


def watched(driver, sub: str = "w") -> list:
    """(key, value, operation) of each KV entry (name, deleted of each object info) streamed for `sub`; None for
    the null end-of-initial-data record."""
    seen = []
    for r in driver.records:
        if r["type"] == "watch" and r["sub"] == sub:
            if (item := r["entry"] if "entry" in r else r["info"]) is None:
                seen.append(None)
            elif "key" in item:
                seen.append((item["key"], base64.b64decode(item["value_b64"]).decode(), item["operation"]))
            else:
                seen.append((item["name"], item.get("deleted", False)))
    return seen
