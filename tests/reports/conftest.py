"""Shared fixtures of the report tests: one SparkSession for the whole session, small synthetic runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from jetcheck.testing.synthetic import LoadSpec, sample_results, write_certify_run, write_load_run

SMALL_LOAD = LoadSpec(records=40_000, duration_s=8.0, error_rate=0.02, seed=7)


@pytest.fixture(scope="session")
def spark():
    from jetcheck.reports.spark import build_session

    session = build_session()
    yield session
    session.stop()


def write_run(run: Path, load: LoadSpec) -> Path:
    """A run folder as `jetcheck run` leaves it before the report: certify/ with one MUST failure, load/."""
    write_certify_run(run / "certify", sample_results())
    write_load_run(run / "load", load)
    return run


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory) -> Path:
    """A run folder of SMALL_LOAD (write_run)."""
    return write_run(tmp_path_factory.mktemp("run"), SMALL_LOAD)


@pytest.fixture(scope="session")
def load_tables(spark, run_folder: Path):
    """SMALL_LOAD's run aggregated (the load report's tables): once per session, the first Spark job of a session
    being its costliest (46 CPU-s of a cold JVM where the second took 12)."""
    from jetcheck.reports.inputs import resolve
    from jetcheck.reports.load_report import aggregate_load

    return aggregate_load(spark, resolve(run_folder))


@pytest.fixture(scope="session")
def built_report(spark, run_folder: Path):
    from jetcheck.reports.build import build_report

    return build_report([str(run_folder)], spark=spark)
