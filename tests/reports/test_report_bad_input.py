"""A load log whose Parquet footer is intact but whose pages are corrupt is one line from `jetcheck report`."""

from __future__ import annotations

from jetcheck.cli import main
from jetcheck.testing.synthetic import LoadSpec, write_load_run


def test_a_corrupt_parquet_page_is_one_line_naming_the_file(spark, tmp_path, capsys):
    """The footer passes the check before Spark; Spark's read failure names the file instead of a Java trace."""
    load = write_load_run(tmp_path / "load", LoadSpec(records=2000, duration_s=2.0, processes=1))
    log = sorted((load / "ops").iterdir())[0]
    content = bytearray(log.read_bytes())
    for at in range(200, len(content) // 2, 37):  # page headers and data; the footer at the end stays intact
        content[at] ^= 0xFF
    log.write_bytes(bytes(content))
    code = main(["report", "--in", str(load), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"jetcheck: {log}: Spark could not read it ("), err
    assert len(err.strip().splitlines()) == 1
