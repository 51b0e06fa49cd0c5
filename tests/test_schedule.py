"""tests/schedule.py: the report test modules on the Spark session are one xdist unit, everything else loadscope's."""

from __future__ import annotations

from pathlib import Path

from tests.schedule import SPARK_UNIT, asks_for_the_session, scope_of, spark_modules

ROOT = Path(__file__).resolve().parents[1]


def test_a_module_asks_for_the_session_through_a_test_or_a_fixture_taking_it():
    assert asks_for_the_session("def test_x(tmp_path, spark):\n    pass\n")
    assert asks_for_the_session("import pytest\n@pytest.fixture\ndef tables(load_tables):\n    return load_tables\n")
    assert asks_for_the_session("class TestX:\n    async def test_y(self, built_report):\n        pass\n")
    assert not asks_for_the_session("def test_x(tmp_path):\n    assert 'spark' in 'spark://'\n")


def test_the_report_modules_on_the_session_are_one_unit_and_the_others_keep_loadscopes():
    assert {"tests/reports/test_report_load.py", "tests/reports/test_report_document.py"} <= spark_modules(ROOT)
    assert "tests/reports/test_report_conformance.py" not in spark_modules(ROOT)
    assert scope_of("tests/reports/test_report_load.py::test_totals_and_rate", ROOT, "x") == SPARK_UNIT
    assert scope_of("tests/reports/test_report_percentiles.py::TestBucket::test_is_monotonic", ROOT, "x") == SPARK_UNIT
    java = "tests/clients/test_java_driver.py::TestWatch::test_stop_ends_a_watch"
    assert (
        scope_of(java, ROOT, "tests/clients/test_java_driver.py::TestWatch")
        == "tests/clients/test_java_driver.py::TestWatch"
    )
