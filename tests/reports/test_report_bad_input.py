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


def test_a_footer_naming_a_column_in_bytes_that_are_not_utf8_is_one_line_before_spark(tmp_path, capsys):
    """pyarrow decodes a column's name from the footer and raises UnicodeDecodeError on bytes that are not UTF-8
    (found by tests/test_bad_input_fuzz.py): the report refuses the file in one line, as any unreadable footer."""
    load = write_load_run(tmp_path / "load", LoadSpec(records=50, duration_s=1.0, processes=1))
    log = sorted((load / "ops").iterdir())[0]
    name = b"intended_ns"
    content = log.read_bytes()
    assert name in content
    log.write_bytes(content.replace(name, b"\xe1\xe1" + name[2:]))  # same length: the footer still parses
    code = main(["report", "--in", str(load), "--out", str(tmp_path / "report")])
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.startswith(f"jetcheck: {log} is not a readable Parquet file: 'utf-8' codec can't decode"), err
    assert len(err.strip().splitlines()) == 1
