"""Parquet files written one table at a time and rolled by rows or age.

A file being written is hidden (``.<name>.part``: Spark and pyarrow datasets skip names starting with '.'), and is
renamed to its final name once closed, so a reader never sees a file without its footer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path


class RollingParquet:
    """Writes tables of one schema to ``directory/<stem>-<n>.parquet``, starting a new file by rows or age."""

    def __init__(
        self, directory: Path, stem: str, schema, roll_rows: int = 2_000_000, roll_seconds: float = 300.0
    ) -> None:
        self.directory = Path(directory)
        self.stem = stem
        self.schema = schema
        self.roll_rows = roll_rows
        self.roll_seconds = roll_seconds
        self.files: list[Path] = []
        self.rows_written = 0
        self._next_number = 0
        self._writer = None
        self._part: Path | None = None
        self._final: Path | None = None
        self._rows_in_file = 0
        self._opened_at = 0.0

    def write(self, table) -> None:
        import pyarrow.parquet as pq

        if table.num_rows == 0:
            return
        if self._writer is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._final, self._part = self._next_names()
            self._writer = pq.ParquetWriter(self._part, self.schema, compression="snappy")
            self._rows_in_file = 0
            self._opened_at = time.monotonic()
        self._writer.write_table(table)
        self._rows_in_file += table.num_rows
        self.rows_written += table.num_rows
        if self._rows_in_file >= self.roll_rows or time.monotonic() - self._opened_at >= self.roll_seconds:
            self.close()

    def _next_names(self) -> tuple[Path, Path]:
        # a later run (or a restarted test in the web UI) into the same directory continues the numbering
        while True:
            final = self.directory / f"{self.stem}-{self._next_number}.parquet"
            part = self.directory / f".{final.name}.part"
            self._next_number += 1
            if not final.exists() and not part.exists():
                return final, part

    def close(self) -> None:
        """Finish the open file (if any); the next write starts the next one."""
        if self._writer is None:
            return
        self._writer.close()
        os.replace(self._part, self._final)
        self.files.append(self._final)
        self._writer = None
