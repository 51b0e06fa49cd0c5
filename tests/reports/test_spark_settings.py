"""A report session's JVM is tuned to the size of the op logs it reports."""

from jetcheck.reports import spark

JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def test_small_logs_get_a_jvm_that_starts_quickly():
    """Logs up to QUICK_START_BYTES get the C1 compiler only and the serial collector."""
    assert spark.settings(log_bytes=spark.QUICK_START_BYTES)[JAVA_OPTIONS] == spark.QUICK_START_JAVA_OPTIONS


def test_larger_logs_get_the_throughput_collector():
    """Logs larger than QUICK_START_BYTES get the parallel (throughput) collector and the full compiler."""
    options = spark.settings(log_bytes=spark.QUICK_START_BYTES + 1)[JAVA_OPTIONS].split()
    assert "-XX:+UseParallelGC" in options
    assert not any(option.startswith("-XX:TieredStopAtLevel") for option in options)


def test_a_session_for_logs_of_unknown_size_keeps_the_jvm_defaults():
    """Without the size of the logs, the JVM keeps its own defaults."""
    assert JAVA_OPTIONS not in spark.settings()
