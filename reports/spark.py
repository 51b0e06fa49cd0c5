"""The SparkSession the reports run on: local and on loopback by default, quiet, Arrow on, no UI."""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from jetcheck.fixtures import children

LOCAL_MASTER = "local[*]"
DRIVER_MEMORY = os.environ.get("JETCHECK_SPARK_DRIVER_MEMORY", "2g")
JVM_STOP_S = 2.0
# Op logs up to this size make a report whose JVM spends more CPU compiling than running (a default `jetcheck run`
# logs about 1.5 MB): its driver JVM stops at the quick C1 compiler and uses the serial collector, which took the
# JVM's CPU for its start and first job from 31 s to 15 s (measured with both on a 2-core machine).
QUICK_START_BYTES = 16 << 20
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def _prepare_environment(loopback: bool) -> None:
    # Python workers must be this interpreter (pandas/pyarrow versions match the driver's).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if loopback:
        os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


def on_loopback(master: str | None) -> bool:
    """local[...] or a cluster whose master is on this machine's loopback: the driver then listens on 127.0.0.1
    only (a remote cluster's executors must reach the driver, so it keeps Spark's default address)."""
    if master is None or master.startswith("local"):
        return True
    return urlsplit(master).hostname in ("127.0.0.1", "localhost", "::1")


def build_session(master: str | None = None, app_name: str = "jetcheck-report", log_bytes: int | None = None):
    """A new (or the already active) SparkSession; local[*] on 127.0.0.1 unless `master` names a cluster.

    `log_bytes`, the size of the op logs it is for, when known: small logs get a JVM tuned to start quickly."""
    from pyspark.sql import SparkSession

    local = master is None or master.startswith("local")
    loopback = on_loopback(master)
    _prepare_environment(loopback)
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master or LOCAL_MASTER)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        # the in-memory catalog: no Hive metastore to set up (the reports read files, they keep no tables)
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if log_bytes is not None and log_bytes <= QUICK_START_BYTES:
        builder = builder.config("spark.driver.extraJavaOptions", QUICK_START_JAVA_OPTIONS)
    if loopback:
        builder = builder.config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
    if local:
        builder = (
            builder.config("spark.driver.memory", DRIVER_MEMORY)
            # A handful of partitions suits one machine; the default 200 mostly costs task overhead.
            .config("spark.sql.shuffle.partitions", str(max(4, 2 * (os.cpu_count() or 2))))
        )
    with _jvm_output_to(spark_log_path()):
        try:
            session = builder.getOrCreate()
        except KeyboardInterrupt:
            _stop_starting_jvms()
            raise
    session.sparkContext.setLogLevel("ERROR")
    return session


def _stop_starting_jvms() -> None:
    """Stop the JVM pyspark was starting when the interrupt came: pyspark drops it, and it would run on for good.

    It is this process's child running SparkSubmit; SIGTERM lets it delete its temp directories on the way out."""
    starting = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            parent = (proc / "stat").read_text().rsplit(")", 1)[1].split()[1]
            if int(parent) == os.getpid() and b"org.apache.spark.deploy.SparkSubmit" in (proc / "cmdline").read_bytes():
                starting.append(int(proc.name))
        except (OSError, IndexError, ValueError):  # gone meanwhile, or not a process
            continue
    for pid in starting:
        children.stop_pid(pid, JVM_STOP_S)


def spark_log_path() -> Path:
    """Where the JVM's own stdout/stderr go (JDK notices, log4j lines): a file, not the user's terminal."""
    default = Path(tempfile.gettempdir()) / f"jetcheck-spark-{os.getuid()}.log"
    return Path(os.environ.get("JETCHECK_SPARK_LOG") or default)


@contextlib.contextmanager
def _jvm_output_to(path: Path) -> Iterator[None]:
    # The JVM inherits file descriptors 1 and 2 when the py4j gateway launches it. Point them at a log file for
    # that moment only: the JVM keeps writing there for its whole life, Python's own output is untouched.
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with open(path, "ab") as log:
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
    try:
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in saved:
            os.close(fd)


@contextlib.contextmanager
def spark_session(master: str | None = None, existing=None, log_bytes: int | None = None) -> Iterator:
    """Yield `existing` if given, else a session this context creates (build_session) and stops afterwards."""
    if existing is not None:
        yield existing
        return
    from pyspark.sql import SparkSession

    already_active = SparkSession.getActiveSession()
    session = build_session(master, log_bytes=log_bytes)
    try:
        yield session
    finally:
        if already_active is None:
            session.stop()
