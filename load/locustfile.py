"""Locust users for NATS JetStream (nats-py): ``locust -f <this file> --jetcheck-scenario NAME --jetcheck-server URL``.

Each user owns one connection and one asyncio driver (jetcheck.load.users) running on the process's asyncio
loop; Locust's task only turns the driver's per-interval totals into request events (one per op kind and
interval: response_time = mean latency in ms of that batch, response_length = bytes), so Locust's stats, web UI,
--csv/--html, --processes and --master/--worker all work while every single operation goes to the op log.

The master (or the single local process) creates the scenario's stream at test start, samples the monitoring
endpoints, and at test stop waits for every worker to have flushed its log, reads what the server stored, deletes
what the run created and writes ``<out>/load.json``. Across hosts (``jetcheck load --master``/``--worker``) the
master also reads every worker's clock at start and stop and gathers their logs (jetcheck.load.fleet_runner).
"""

from __future__ import annotations

import csv
import functools
import gc
import itertools
import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Any

import gevent
from locust import User, constant, events, task
from locust.runners import MasterRunner, WorkerRunner
from locust.stats import PERCENTILES_TO_REPORT, StatsCSV, StatsEntry, StatsError, bucket_response_time

from jetcheck.fixtures.cleanup import PrefixInUse, claim_prefix
from jetcheck.fixtures.target import Target, speaks_tls
from jetcheck.load import bridge, fleet, runfile
from jetcheck.load.clock import time_ns
from jetcheck.load.driven_users import client_description, driven_class, driver_for, is_driven
from jetcheck.load.fleet_runner import FleetMaster, WorkerShipping, register_worker
from jetcheck.load.monitor import MonitorSampler, default_monitor_url, reachable
from jetcheck.load.oplog import OpLog
from jetcheck.load.scenarios import (
    CONSUMER,
    PUBLISHER,
    LoadSettings,
    scenario,
    server_counts,
    setup,
    teardown,
)
from jetcheck.load.settings import load_settings, locust_values
from jetcheck.load.users import Driver, driver_class
from jetcheck.options import add_locust_arguments, new_run_prefix, resolve_credentials
from jetcheck.redact import redact_url

logger = logging.getLogger("jetcheck.load")
DRAINED = "jetcheck_drained"
DRAIN = "jetcheck_drain"
WORKER_DRAIN_TIMEOUT_S = 60.0
FLUSH_EVERY_S = 1.0
FLUSH_CHECK_S = 0.1
GC_YOUNG_THRESHOLD = 100_000

_user_numbers = itertools.count()
_oplog: OpLog | None = None
_drivers: set[Driver] = set()
_run: dict[str, Any] = {}  # master/local: what load.json needs, filled at test start
_run_ids_given: dict[str, tuple[str, str]] = {}  # the run id and prefix from the command line, if any
_cpu_at_start = 0.0  # this process's CPU seconds when the test started (load.json reports the load's CPU cost)
_roles_here: set[str] = set()  # the roles this process's users played in the current test
_stopping: dict[str, int] = {}  # "ns": when this process was first asked to stop in the current test
_environment: dict[str, Any] = {}  # "env": Locust's environment (the quit event does not carry it)
_shipping: dict[str, WorkerShipping] = {}  # "current": a fleet worker's log on its way to the master


@events.init_command_line_parser.add_listener
def add_options(parser) -> None:
    add_locust_arguments(parser)  # argument groups do not take Locust's include_in_web_ui


def settings_from(options) -> LoadSettings:
    """This test's settings from Locust's parsed options (`jetcheck load` hands them over: jetcheck.load.settings)."""
    users = options.jetcheck_users_total or getattr(options, "num_users", None) or 1
    values = {**locust_values(options), "users": users}
    if (own := fleet.worker_dir()) is not None:  # a worker for a master elsewhere logs in a folder of its own
        values["out"] = own / values["run_id"]
    return load_settings(values)


def target_for(url: str) -> Target:
    """The target at `url`, with the credentials `jetcheck load` (or the user) put in JETCHECK_* variables."""
    return Target(url=url, credentials=resolve_credentials({}, os.environ))


def connect_to(url: str):
    return lambda: target_for(url).connect()


def process_oplog(settings: LoadSettings) -> OpLog:
    """This process's op log, (re)opened for the current run."""
    global _oplog
    if _oplog is None or _oplog.closed or _oplog.run_id != settings.run_id or _oplog.pid != os.getpid():
        if fleet.worker_dir() is None:
            _oplog = OpLog(Path(settings.out_dir), settings.run_id, settings.scenario)
        else:  # a worker for a master elsewhere: its files travel as they are finished
            _oplog = OpLog(Path(settings.out_dir), settings.run_id, settings.scenario, roll_seconds=fleet.SHIP_EVERY_S)
            _shipping["current"] = WorkerShipping(Path(settings.out_dir), _environment["env"].runner)
        bridge.process_loop().call_soon_threadsafe(_start_flusher, _oplog)
    return _oplog


def _start_flusher(log: OpLog) -> None:
    import asyncio

    asyncio.get_running_loop().create_task(log.flush_periodically(FLUSH_EVERY_S, FLUSH_CHECK_S))


def stop_drivers(at_ns: int | None = None) -> None:
    """Stop every user's driver of this process at once: nothing due at or after `at_ns` (default now) is started,
    and what is in flight is finished and logged. Idempotent; the users keep their drivers for their last report."""
    drivers = list(_drivers)
    at_ns = time_ns() if at_ns is None else at_ns
    for driver in drivers:
        driver.stop_intending(at_ns)
    if drivers:
        bridge.run(_stop_all(drivers), timeout=60)


async def _stop_all(drivers: list[Driver]) -> None:
    import asyncio

    await asyncio.gather(*(driver.stop() for driver in drivers))


def stop_load_before_runner(runner) -> None:
    """Make `runner.stop()` stop this process's drivers before anything else it does.

    Locust's Runner.stop begins with ``inspect.stack()`` for a debug line: reading the stack's source files and
    mapping every loaded module to its file holds the GIL for 150-300 ms on a busy machine. The process's asyncio
    loop, and with it every user's schedule, stands still meanwhile, while open-loop sends keep falling due: they
    went out late by up to that much and made the wind-down the run's p99. Stopped first, the drivers intend nothing
    during it. Every way to stop goes through this method: the run-time limit (quit), the web UI, the master's stop
    message and jetcheck's drain. Locust has no event before it (tests/test_private_apis.py lists this use)."""
    locust_stop = runner.stop

    @functools.wraps(locust_stop)
    def stop(*args, **kwargs):
        stop_drivers(_stopping.setdefault("ns", time_ns()))
        return locust_stop(*args, **kwargs)

    runner.stop = stop


def close_oplog() -> int:
    """Wait for this process's users to be drained and its log to be on disk; returns rows written."""
    stop_drivers()
    _drivers.clear()
    if _oplog is None:
        return 0
    _oplog.close()
    return _oplog.rows_written


class NatsUser(User):
    """Base of the two roles; abstract so Locust does not run it."""

    abstract = True
    role = PUBLISHER
    wait_time = constant(0.5)  # the reporting interval: the load itself runs in asyncio, not between waits

    def on_start(self) -> None:
        settings = settings_from(self.environment.parsed_options)
        self.number = next(_user_numbers)
        _roles_here.add(self.role)
        log = process_oplog(settings)
        client = self.environment.parsed_options.jetcheck_client
        if is_driven(client):  # the driver (built and started here, in a greenlet) runs the schedule itself
            target = target_for(settings.server_url)
            self.driver = driven_class(settings, self.role)(
                settings, log, self.number, driver_for(client), target.credentials
            )
        else:
            cls = driver_class(settings, self.role)
            self.driver = cls(settings, log, self.number, connect_to(settings.server_url))
        bridge.run(self.driver.start(), timeout=30)
        _drivers.add(self.driver)

    @task
    def report(self) -> None:
        """Fire one request event per op kind for what the driver did since the last report."""
        fire = self.environment.events.request.fire
        for op, stats in self.driver.take_stats().items():
            if stats.ok:
                fire(
                    request_type="JS",
                    name=op,
                    response_time=stats.latency_ns / stats.ok / 1e6,
                    response_length=stats.nbytes,
                    exception=None,
                    context={"ops": stats.ok},
                )
            for error, count in stats.failures():
                fire(
                    request_type="JS",
                    name=op,
                    response_time=0.0,
                    response_length=0,
                    exception=error,
                    context={"ops": count},
                )
        if self.driver.failure is not None:
            failure, self.driver.failure = self.driver.failure, None
            fire(request_type="JS", name="driver", response_time=0.0, response_length=0, exception=failure, context={})

    def on_stop(self) -> None:
        driver = getattr(self, "driver", None)
        if driver is not None and driver in _drivers:
            _drivers.discard(driver)
            bridge.run(driver.stop(), timeout=60)
            self.report()


class NatsPublisher(NatsUser):
    """Publishes (or uses KV) at the scenario's rate share, or as fast as it can."""

    role = PUBLISHER


class NatsConsumer(NatsUser):
    """Consumes with the scenario's consumer kind."""

    role = CONSUMER


@events.init.add_listener
def pick_users(environment, **_kwargs) -> None:
    """Keep only the scenario's roles; in mixed scenarios `--jetcheck-consumers` users consume."""
    # gevent's timers count from the hub's cached clock, which went stale while this file's imports ran (seconds
    # on a busy machine): without a refresh, Locust's --run-time timer set next can fire at once
    gevent.get_hub().loop.update_now()
    _environment["env"] = environment
    options = environment.parsed_options
    if environment.runner is not None:
        register_messages(environment)
        if not isinstance(environment.runner, MasterRunner):  # a master runs no users
            stop_load_before_runner(environment.runner)
            environment.events.request.add_listener(functools.partial(count_every_op, environment.stats))
    if options is None or isinstance(environment.runner, WorkerRunner):
        return  # a worker runs whatever the master dispatches (a remote worker learns the scenario at spawn)
    spec = scenario(options.jetcheck_scenario)
    wanted = []
    if PUBLISHER in spec.roles:
        wanted.append(NatsPublisher)
    if CONSUMER in spec.roles:
        wanted.append(NatsConsumer)
        NatsConsumer.fixed_count = options.jetcheck_consumers if PUBLISHER in spec.roles else 0
    environment.user_classes[:] = [cls for cls in wanted if cls in environment.user_classes] or wanted


def count_every_op(stats, request_type, name, response_time, response_length, exception=None, context=None, **_):
    """Count a report's `context["ops"]` operations in Locust's statistics, not one: Locust's totals are then the
    op log's. Locust's own listener (registered before this one) logged the first; the rest count with the same
    (mean) response time, merged in at once as Locust's master merges a worker's report (StatsEntry.extend)."""
    extra = (context or {}).get("ops", 1) - 1
    if extra <= 0:
        return
    now = time.time()
    timed = response_time is not None
    rest = StatsEntry.unserialize(
        {
            "name": name,
            "method": request_type,
            "last_request_timestamp": now,
            "start_time": now,
            "num_requests": extra,
            "num_none_requests": 0 if timed else extra,
            "num_failures": extra if exception is not None else 0,
            "total_response_time": response_time * extra if timed else 0,
            "max_response_time": response_time if timed else 0,
            "min_response_time": response_time if timed else None,
            "total_content_length": 0,  # the report's bytes were logged with the first
            "response_times": {bucket_response_time(response_time): extra} if timed else {},
            "num_reqs_per_sec": {int(now): extra},
            "num_fail_per_sec": {int(now): extra} if exception is not None else {},
        },
        stats,
    )
    stats.total.extend(rest)
    stats.get(name, request_type).extend(rest)
    if exception is not None:
        # not public, and why: tests/test_private_apis.py
        stats.errors[StatsError.create_key(request_type, name, exception)].occurrences += extra


def register_messages(environment) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):

        def drain(environment, msg, **_kwargs) -> None:
            environment.runner.stop()  # stops users (each drains) and fires test_stop (closes the log)
            rows = close_oplog()
            cpu_s = round(time.process_time() - _cpu_at_start, 3)  # before shipping: that is not the load's cost
            shipping = _shipping.pop("current", None)
            shipped = shipping.finish() if shipping else []
            options = environment.parsed_options
            environment.runner.send_message(
                DRAINED,
                {
                    **fleet.identity(),
                    "rows": rows,
                    "cpu_s": cpu_s,
                    "roles": sorted(_roles_here),
                    "stopping_ns": _stopping.get("ns"),
                    "client": runfile.client_entry(client_description(options.jetcheck_client) if options else None),
                    "versions": runfile.versions(),
                    "own_folder": fleet.worker_dir() is not None,  # its log travels and its clock is corrected
                    "shipped": shipped,
                },
            )

        runner.register_message(DRAIN, drain, concurrent=True)
        register_worker(runner)
    elif isinstance(runner, MasterRunner):

        def drained(environment, msg, **_kwargs) -> None:
            _run.setdefault("drained", []).append(msg.data)
            if (master := _run.get("fleet")) is not None:
                master.drained(msg.node_id, msg.data)

        runner.register_message(DRAINED, drained)
        FleetMaster.register(runner, lambda: _run.get("fleet"))


@events.test_start.add_listener
def on_test_start(environment, **_kwargs) -> None:
    global _cpu_at_start
    _cpu_at_start = time.process_time()
    _roles_here.clear()
    _stopping.clear()
    if isinstance(environment.runner, WorkerRunner):
        freeze_heap()
        return
    options = environment.parsed_options
    # the master decides each test's identity (a new one per test in the web UI unless given on the command
    # line); custom options travel to the workers with the spawn message
    given = _run_ids_given.setdefault("ids", (options.jetcheck_run_id, options.jetcheck_run_prefix))
    options.jetcheck_run_id = given[0] or "load-" + secrets.token_hex(4)
    options.jetcheck_run_prefix = given[1] or new_run_prefix()
    options.jetcheck_users_total = getattr(options, "num_users", None) or 1
    settings = settings_from(options)
    _run.clear()
    _run.update(settings=settings, start_ns=time_ns(), drained=[])
    if isinstance(environment.runner, MasterRunner):
        _run["fleet"] = master = FleetMaster(environment.runner, Path(settings.out_dir))
        master.take_part()
        master.measure("start")

    async def prepare() -> str:
        nc = await target_for(settings.server_url).connect()
        try:
            if not options.jetcheck_prefix_claimed:  # refused when the target already uses the prefix
                await claim_prefix(nc, settings.prefix)
            await setup(settings, nc)
            _run["tls"] = speaks_tls(nc)
            return str(nc.server_info.get("version", ""))
        finally:
            await nc.close()

    try:
        _run["server_version"] = bridge.run(prepare(), timeout=120)
    except PrefixInUse:
        _run.clear()  # nothing on the target is this test's: its end must not delete anything
        raise
    monitor = settings.monitor_url or default_monitor_url(settings.server_url)
    _run["monitor_url"] = monitor
    _run["sampler"] = (
        MonitorSampler(monitor, Path(settings.out_dir), settings.run_id).start() if reachable(monitor) else None
    )
    freeze_heap()
    _cpu_at_start = time.process_time()  # the setup (e.g. prefill) is not the load's cost


def freeze_heap() -> None:
    """Keep the garbage collector off the load's hot path.

    What exists before the load (Locust, Flask, Arrow, ...: hundreds of thousands of objects) is exempted, or every
    full collection would walk all of it; and young collections run every GC_YOUNG_THRESHOLD allocations instead
    of every 700, so an operation's objects (future, callbacks, ack) are usually gone before one runs instead of
    being carried, with the thousand operations in flight, into the older generations."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, *gc.get_threshold()[1:])


@events.test_stop.add_listener
def on_test_stop(environment, **_kwargs) -> None:
    runner = environment.runner
    if isinstance(runner, WorkerRunner):
        close_oplog()
        return
    if "settings" not in _run:
        return
    settings: LoadSettings = _run["settings"]
    master: FleetMaster | None = _run.get("fleet")
    workers = len(master.records) if master else 0
    fleet_workers: list[dict] = []
    if master is not None:
        master.measure("end")
        runner.send_message(DRAIN, None)
        master.wait_drained(WORKER_DRAIN_TIMEOUT_S)
        fleet_workers = master.finish()
        load_cpu = {str(w.get("pid")): w.get("cpu_s") for w in _run["drained"]}
        roles = {str(w.get("pid")): w.get("roles", []) for w in _run["drained"]}
        stopping = {str(w.get("pid")): w.get("stopping_ns") for w in _run["drained"]}
    else:
        close_oplog()
        load_cpu = {str(os.getpid()): round(time.process_time() - _cpu_at_start, 3)}
        roles = {str(os.getpid()): sorted(_roles_here)}
        stopping = {str(os.getpid()): _stopping.get("ns")}
    end_ns = time_ns()

    async def finish() -> tuple[dict, list[str]]:
        nc = await target_for(settings.server_url).connect()
        try:
            counts = await server_counts(settings, nc)
            deleted = await teardown(settings, nc) if settings.cleanup else []
            return counts, deleted
        finally:
            await nc.close()

    try:
        counts, deleted = bridge.run(finish(), timeout=60)
    except Exception as exc:  # the run's logs are still worth writing down
        logger.error("jetcheck: reading server counts failed: %s", exc)
        counts, deleted = {"error": f"{type(exc).__name__}: {exc}"}, []
    sampler: MonitorSampler | None = _run.pop("sampler", None)
    samples = sampler.stop() if sampler else []
    options = environment.parsed_options
    run = runfile.describe(
        settings,
        processes=max(workers, 1),
        duration_s=getattr(options, "run_time", None),
        server_url=redact_url(settings.server_url),
        server_version=options.jetcheck_server_version or _run.get("server_version", ""),
        tls=_run.get("tls", False),
        start_ns=_run["start_ns"],
        end_ns=end_ns,
        server=counts,
        deleted=deleted,
        monitor={
            "url": _run.get("monitor_url", ""),
            "sampled": bool(sampler),
            "samples": sampler.samples if sampler else 0,
            "files": len(samples),
        },
        workers_drained=_run.get("drained", []),
        expected_workers=workers,
        load_cpu_s=load_cpu,
        process_roles=roles,
        client=client_description(options.jetcheck_client),
        workers=fleet_workers,
    )
    run["stopping_ns"] = stopping  # by pid: when each load process began to stop; it intended nothing after
    runfile.write(Path(settings.out_dir), run)
    logger.info("jetcheck: wrote %s", json.dumps({"run_id": settings.run_id, "out": settings.out_dir}))
    _run.clear()


@events.quitting.add_listener
def on_quitting(environment, **_kwargs) -> None:
    if _oplog is not None and not _oplog.closed:
        close_oplog()


@events.quit.add_listener
def write_final_csv(**_kwargs) -> None:
    """Write ``<csv>_stats.csv`` once more with the final totals: Locust's writer greenlet rewrites it once a second,
    so the last reports (users drained at the stop) would be missing from it, and its totals would fall short of
    the op log's."""
    environment = _environment.get("env")
    options = getattr(environment, "parsed_options", None)
    if environment is None or not getattr(options, "csv_prefix", None) or isinstance(environment.runner, WorkerRunner):
        return
    with open(options.csv_prefix + "_stats.csv", "w", newline="") as out:
        StatsCSV(environment, PERCENTILES_TO_REPORT).requests_csv(csv.writer(out))
