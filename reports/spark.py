"""The SparkSession the reports run on: local and on loopback by default, quiet, Arrow on, no UI."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import py4j

from jetcheck.fixtures import children

LOCAL_MASTER = "local[*]"
DRIVER_MEMORY = os.environ.get("JETCHECK_SPARK_DRIVER_MEMORY", "2g")
JVM_STOP_S = 2.0
# pyspark.java_gateway.launch_gateway gives the process it starts the file to write the JVM's address in
LAUNCH_MARK = b"\0_PYSPARK_DRIVER_CONN_INFO_PATH="
# Op logs up to this size make a report whose JVM spends more CPU compiling than running (a default `jetcheck run`
# logs about 1.5 MB): its driver JVM stops at the quick C1 compiler and uses the serial collector, which took the
# JVM's CPU for its start and first job from 31 s to 15 s (measured with both on a 2-core machine).
QUICK_START_BYTES = 16 << 20
QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
# Larger logs make a report one long batch of work: the throughput collector leaves both cores to the tasks where G1's
# concurrent work competes with them (a 10M-operation aggregation took 0.82-0.87 of G1's time, same run).
BATCH_JAVA_OPTIONS = "-XX:+UseParallelGC"


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


def settings(master: str | None = None, app_name: str = "jetcheck-report", log_bytes: int | None = None) -> dict:
    """The Spark configuration of a report session: local[*] on 127.0.0.1 unless `master` names a cluster.

    `log_bytes`, the size of the op logs it is for, when known: small logs get a JVM tuned to start quickly, larger
    ones a JVM tuned for throughput."""
    local = master is None or master.startswith("local")
    conf = {
        "spark.master": master or LOCAL_MASTER,
        "spark.app.name": app_name,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # the in-memory catalog: no Hive metastore to set up (the reports read files, they keep no tables)
        "spark.sql.catalogImplementation": "in-memory",
        "spark.sql.session.timeZone": "UTC",
    }
    if log_bytes is not None:
        quick = log_bytes <= QUICK_START_BYTES
        conf["spark.driver.extraJavaOptions"] = QUICK_START_JAVA_OPTIONS if quick else BATCH_JAVA_OPTIONS
    if on_loopback(master):
        conf["spark.driver.host"] = conf["spark.driver.bindAddress"] = "127.0.0.1"
    if local:
        conf["spark.driver.memory"] = DRIVER_MEMORY
        # A handful of partitions suits one machine; the default 200 mostly costs task overhead.
        conf["spark.sql.shuffle.partitions"] = str(max(4, 2 * (os.cpu_count() or 2)))
    return conf


def build_session(
    master: str | None = None, app_name: str = "jetcheck-report", log_bytes: int | None = None, log: Path | None = None
):
    """A new (or the already active) SparkSession configured by settings(); its JVM's output goes to `log` (by
    default spark_log_path()), never to the terminal."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    _prepare_environment(on_loopback(master))
    conf = SparkConf().setAll(list(settings(master, app_name, log_bytes).items()))
    try:
        if SparkSession.getActiveSession() is None:
            _start_jvm(conf, log or spark_log_path())
        session = SparkSession.builder.config(conf=conf).getOrCreate()
    except KeyboardInterrupt:
        stop_starting_jvms(log)
        raise
    session.sparkContext.setLogLevel("ERROR")
    return session


class _Jvm:
    """Whether this process has started pyspark's JVM: pyspark keeps that one for the process's life, and a
    SparkContext made after another was stopped runs in it."""

    lock = threading.Lock()
    started = False


def _start_jvm(conf, log_path: Path) -> None:
    """Start pyspark's JVM for `conf`, its stdout and stderr appended to `log_path`, with a SparkContext in it;
    nothing when this process has started it already (the session builder then makes a context in that one).

    The JVM gets output files of its own (pyspark's launch_gateway takes them) rather than the process's file
    descriptors 1 and 2 for the moment of its start, so a session can start on a thread while others print."""
    from pyspark import SparkContext
    from pyspark.java_gateway import launch_gateway

    with _Jvm.lock:
        if _Jvm.started:
            return
        with open(log_path, "ab") as log:
            gateway = launch_gateway(conf, popen_kwargs={"stdout": log, "stderr": log})
        _Jvm.started = True
        SparkContext(conf=conf, gateway=gateway)


class _Py4jCallsCutOff(logging.Handler):
    """py4j reports a call whose JVM went away on its own loggers and on the root logger (`logging.exception`),
    which prints it with its traceback on the user's terminal after "jetcheck: interrupted"; a JVM stopped on
    purpose cuts such calls off, so their records go to the Spark log instead."""

    def __init__(self, log_path: Path):
        super().__init__()
        self.log_path = log_path

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(OSError), open(self.log_path, "a", encoding="utf-8") as log:
            log.write(self.format(record) + "\n")

    def keep_off_root(self, record: logging.LogRecord) -> bool:
        """The root logger's filter: py4j's records are written here, not printed."""
        if record.pathname.startswith(_PY4J_DIR):
            self.handle(record)
            return False
        return True


_PY4J_DIR = str(Path(py4j.__file__).parent)


def stop_starting_jvms(log: Path | None = None) -> None:
    """Stop the JVM pyspark was starting when the interrupt came (pyspark drops it, and it would run on for good),
    or the one a warm-up still works in (reports.warm); what py4j says of the calls that cut off goes to the Spark
    log, `log` or spark_log_path() (the root logger keeps that filter from then on).

    It is this process's child whose environment has LAUNCH_MARK, which pyspark's launch gives it from the start
    (SparkSubmit is in its command line only once the spark-submit script has run spark-class); SIGTERM lets the JVM
    delete its temp directories on the way out. A zombie has no environment left: one stopped already is passed by."""
    own = logging.getLogger("py4j")
    if not any(isinstance(h, _Py4jCallsCutOff) for h in own.handlers):
        to_log = _Py4jCallsCutOff(log or spark_log_path())
        logging.getLogger().addFilter(to_log.keep_off_root)
        own.addHandler(to_log)
        own.propagate = False
    stopped = launched_jvms()
    for pid in stopped:
        children.stop_pid(pid, JVM_STOP_S)
    if stopped:
        _forget_the_jvm()


def _forget_the_jvm() -> None:
    """pyspark keeps the gateway to its JVM for the process's life: once that JVM is stopped, a later session (the
    report's own, after a warm-up closed) must launch another, not call the one gone. Nothing public forgets it: the
    private attributes below are listed, with why, in tests/test_private_apis.py."""
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    _Jvm.started = False
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def launched_jvms() -> list[int]:
    """This process's children that pyspark launched, starting or running: the ones with LAUNCH_MARK."""
    launched = []
    for pid, parent in parents().items():
        if parent == os.getpid():
            with contextlib.suppress(OSError):  # gone meanwhile
                if LAUNCH_MARK in b"\0" + Path(f"/proc/{pid}/environ").read_bytes():
                    launched.append(pid)
    return launched


def parents() -> dict[int, int]:
    """Every process's parent, from /proc."""
    found = {}
    for proc in Path("/proc").glob("[0-9]*"):
        with contextlib.suppress(OSError, IndexError, ValueError):  # gone meanwhile
            found[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
    return found


def spark_log_path() -> Path:
    """Where the JVM's own stdout/stderr go (JDK notices, log4j lines): a file, not the user's terminal."""
    default = Path(tempfile.gettempdir()) / f"jetcheck-spark-{os.getuid()}.log"
    return Path(os.environ.get("JETCHECK_SPARK_LOG") or default)


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
