"""Load through the client drivers: the drivers' load ops (PROTOCOL.md "Load") and `jetcheck load --client X`.

The protocol tests talk to the built driver through the suite's own DriverProcess against the session's embedded
server; the command tests run `jetcheck load --client X` end to end and read the op log, Locust's CSV and load.json.
Rates are low and runs short: what is checked is exact (counts, the schedule's spacing), not how fast it went.
"""

from __future__ import annotations

import asyncio
import base64
import time
import uuid

import numpy as np
import pyarrow.dataset as ds
import pytest
import pytest_asyncio
from nats.js import api

from jetcheck.conformance.clients.build import go_driver, go_pinned_version, js_driver, js_pinned_version
from jetcheck.conformance.clients.driver_adapter import normalise_version
from jetcheck.conformance.clients.driver_pipe import DriverProcess
from jetcheck.errors import ConfigError
from jetcheck.load.driven_users import CONSUME_FIELDS, CONSUMED, FETCHED, KV_FIELDS, KV_OPS, ROW_FIELDS
from jetcheck.load.scenarios import BATCH_SIZE, counter_totals

from .test_load_runs import assert_no_lost_records, locust_totals, run_load

BUILDS = {"nats.go": (go_driver, go_pinned_version), "nats.js": (js_driver, js_pinned_version)}
WAIT_S = 60.0  # bound on any wait for the driver on a busy machine
NS = 1_000_000_000


def driver_command(client: str) -> list[str]:
    try:
        return BUILDS[client][0]()
    except ConfigError as exc:  # no go / node here: that client's driver cannot run
        pytest.skip(f"the {client} driver cannot be built here: {exc}")


@pytest.fixture(params=sorted(BUILDS))
def client(request) -> str:
    driver_command(request.param)  # skips when it cannot be built
    return request.param


class LoadSub:
    """A load run's streamed rows, as the driver sent them."""

    def __init__(self, fields: tuple[str, ...] = ROW_FIELDS) -> None:
        self.fields = fields
        self.rows = np.empty((0, len(fields)), dtype=np.int64)
        self.errors: list[str] = []
        self.subjects: list[str] = []
        self.grew = asyncio.Event()

    def take(self, record: dict) -> None:
        rows = np.frombuffer(base64.b64decode(record["rows_b64"]), dtype="<i8").reshape(-1, len(self.fields))
        self.rows = np.concatenate([self.rows, rows])
        self.errors = record["errors"]
        self.subjects = record.get("subjects", [])
        self.grew.set()

    async def wait_rows(self, count: int) -> None:
        async with asyncio.timeout(WAIT_S):
            while len(self.rows) < count:
                self.grew.clear()
                await self.grew.wait()

    def column(self, name: str) -> np.ndarray:
        return self.rows[:, self.fields.index(name)]


@pytest_asyncio.fixture
async def driver(client, embedded_server):
    process = DriverProcess(driver_command(client), f"{client} driver")
    try:
        await asyncio.to_thread(process.start)
        await process.request("connect", session="s1", url=embedded_server.url, credentials={}, reconnect_wait_s=0.1)
        yield process
    finally:
        await asyncio.to_thread(process.shutdown)


@pytest_asyncio.fixture
async def stream(embedded_server):
    nc = await embedded_server.connect()
    js = nc.jetstream()
    name = f"LOADDRV_{uuid.uuid4().hex[:8].upper()}"
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{name.lower()}.>"]))
    try:
        yield js, name, f"{name.lower()}.p"
    finally:
        await js.delete_stream(name)
        await nc.close()


async def run_load_op(driver: DriverProcess, subject: str, rows: int, **settings) -> tuple[LoadSub, dict]:
    sub = LoadSub()
    driver.route("sub", "l1", sub.take)
    await driver.request("load_publish", session="s1", sub="l1", subject=subject, payload_size=16, **settings)
    await sub.wait_rows(rows)
    stopped = await driver.request("load_stop", WAIT_S, sub="l1", at_ns=None)
    return sub, stopped


@pytest.mark.asyncio
async def test_hello_lists_the_load_ops(driver):
    """A driver's hello names load_publish, load_consume, load_kv, load_counter, load_batch and load_stop among its
    ops."""
    assert {"load_publish", "load_consume", "load_kv", "load_counter", "load_batch", "load_stop"} <= set(
        driver.hello["ops"]
    )


@pytest.mark.asyncio
async def test_an_open_loop_run_streams_every_publish_on_its_schedule(driver, stream):
    """Open loop: every intended time of the schedule is one row, spaced 1/rate apart, sent no earlier than
    intended, acked after it was sent, and the acked rows are exactly what the stream stored; load_stop answers
    after the last row."""
    js, name, subject = stream
    sub, stopped = await run_load_op(driver, subject, 300, rate=500.0, max_inflight=200, batch_ms=50, stamp=False)
    assert len(sub.rows) == stopped["ops"] == stopped["acked"] + stopped["overflow"] + stopped["failed"]
    assert stopped["failed"] == 0 and stopped["overflow"] == 0, sub.errors
    # a round trip after the answer: nothing for the run arrives after load_stop answered
    rows_at_stop = len(sub.rows)
    await driver.request("hello")
    assert len(sub.rows) == rows_at_stop
    intended = np.sort(sub.column("intended_ns"))
    spacing = np.diff(intended)
    assert np.all(np.abs(spacing - NS / 500) <= 1), "intended times are not the 500/s schedule"
    assert np.all(sub.column("sent_ns") >= sub.column("intended_ns"))
    assert np.all(sub.column("acked_ns") >= sub.column("sent_ns"))
    stored = (await js.stream_info(name)).state.messages
    assert sorted(sub.column("stream_seq")) == list(range(1, stored + 1))


@pytest.mark.asyncio
async def test_an_open_loop_run_logs_overflow_past_its_window(driver, stream):
    """With one publish allowed in flight and a rate far beyond one round trip, operations due while it is
    outstanding are not sent but logged as Overflow; every row is either acked or an overflow."""
    js, name, subject = stream
    sub, stopped = await run_load_op(driver, subject, 2000, rate=20000.0, max_inflight=1, batch_ms=50, stamp=False)
    error = sub.column("error")
    assert stopped["overflow"] > 0 and "Overflow" in sub.errors
    overflow = error == sub.errors.index("Overflow") + 1
    assert int(overflow.sum()) == stopped["overflow"]
    assert int((error == 0).sum()) == stopped["acked"] == (await js.stream_info(name)).state.messages
    assert stopped["failed"] == 0


@pytest.mark.asyncio
async def test_a_closed_loop_run_publishes_back_to_back(driver, stream):
    """Closed loop (rate 0): each publish is intended when it is sent, all are acked, and the stream holds them."""
    js, name, subject = stream
    sub, stopped = await run_load_op(driver, subject, 500, rate=0.0, max_inflight=20, batch_ms=50, stamp=True)
    assert stopped["acked"] == stopped["ops"] == len(sub.rows)
    assert np.all(sub.column("sent_ns") >= sub.column("intended_ns"))
    assert (await js.stream_info(name)).state.messages == stopped["acked"]
    stamped = await js.get_msg(name, 1)
    assert stamped.headers and int(stamped.headers["Jc-Seq"]) >= 1 and int(stamped.headers["Jc-Ts"]) > 0


@pytest.mark.asyncio
async def test_a_consume_run_logs_and_acks_every_message_of_the_stream_once(driver, stream):
    """load_consume on a durable pull consumer: each stored message is one consume row (its stream sequence, first
    delivery, subject and size), stamped ones carry a non-negative end-to-end latency and unstamped ones none, the
    fetch rows add up to the messages, and after load_stop the server holds every message acknowledged."""
    js, name, subject = stream
    count = 300
    for number in range(count):
        stamp = {"Jc-Ts": str(time.time_ns()), "Jc-Seq": str(number + 1)} if number % 2 == 0 else None
        await js.publish(subject, b"y" * 24, headers=stamp)
    await js.add_consumer(name, api.ConsumerConfig(durable_name="LOADC", ack_policy=api.AckPolicy.EXPLICIT))
    sub = LoadSub(CONSUME_FIELDS)
    driver.route("sub", "c1", sub.take)
    await driver.request("load_consume", session="s1", sub="c1", stream=name, durable="LOADC", batch=64, batch_ms=50)
    consumed = lambda: int((sub.column("op") == CONSUMED).sum())  # noqa: E731
    async with asyncio.timeout(WAIT_S):
        while consumed() < count:
            sub.grew.clear()
            await sub.grew.wait()
    stopped = await driver.request("load_stop", WAIT_S, sub="c1", at_ns=None)
    messages = sub.rows[sub.column("op") == CONSUMED]
    fetches = sub.rows[sub.column("op") == FETCHED]
    field = CONSUME_FIELDS.index
    assert stopped["ops"] == count and stopped["failed"] == 0, sub.errors
    assert sorted(messages[:, field("stream_seq")]) == list(range(1, count + 1))
    assert set(messages[:, field("delivered")]) == {1} and set(messages[:, field("error")]) == {0}
    assert set(messages[:, field("size")]) == {24}
    assert {sub.subjects[n - 1] for n in messages[:, field("subject")]} == {subject}
    assert np.all(messages[:, field("ended_ns")] >= messages[:, field("started_ns")])
    e2e = messages[np.argsort(messages[:, field("stream_seq")]), field("e2e_ns")]
    assert np.all(e2e[0::2] >= 0) and np.all(e2e[1::2] == -1), "stamped messages carry e2e, unstamped ones not"
    assert int(fetches[:, field("size")].sum()) == count and stopped["fetches"] == len(fetches)
    info = await js.consumer_info(name, "LOADC")
    assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (count, 0, 0)


@pytest_asyncio.fixture
async def feature_stream(embedded_server, request):
    """A stream with the option of request.param: allow_msg_counter (ADR-49) or allow_atomic (ADR-50)."""
    nc = await embedded_server.connect()
    js = nc.jetstream()
    name = f"LOADREQ_{uuid.uuid4().hex[:8].upper()}"
    await js.add_stream(api.StreamConfig(name=name, subjects=[f"{name.lower()}.>"], **{request.param: True}))
    try:
        yield js, name, f"{name.lower()}.p"
    finally:
        await js.delete_stream(name)
        await nc.close()


async def run_request_op(driver, op: str, subject: str, rows: int, **settings) -> tuple[LoadSub, dict]:
    sub = LoadSub()
    driver.route("sub", "r1", sub.take)
    await driver.request(op, session="s1", sub="r1", subject=subject, max_inflight=200, batch_ms=50, **settings)
    await sub.wait_rows(rows)
    stopped = await driver.request("load_stop", WAIT_S, sub="r1", at_ns=None)
    assert len(sub.rows) == stopped["ops"] == stopped["acked"] + stopped["overflow"] + stopped["failed"]
    assert stopped["failed"] == 0 and stopped["overflow"] == 0, sub.errors
    assert np.all(sub.column("acked_ns") >= sub.column("sent_ns"))
    assert np.all(sub.column("sent_ns") >= sub.column("intended_ns"))
    return sub, stopped


@pytest.mark.asyncio
@pytest.mark.parametrize("feature_stream", ["allow_msg_counter"], indirect=True)
@pytest.mark.parametrize("rate", [500.0, 0.0], ids=["open", "closed"])
async def test_a_counter_run_logs_each_increment_the_counter_counted(driver, feature_stream, rate):
    """load_counter: each row is one increment acked with its stream sequence (all of the stream's, once each),
    and the counter's value is the number of acked increments."""
    js, name, subject = feature_stream
    sub, stopped = await run_request_op(driver, "load_counter", subject, 200, rate=rate, payload_size=0)
    assert sorted(sub.column("stream_seq")) == list(range(1, stopped["acked"] + 1))
    assert (await js.stream_info(name)).state.messages == stopped["acked"]
    assert await counter_totals(js, name) == {"subjects": 1, "total": stopped["acked"]}


@pytest.mark.asyncio
@pytest.mark.parametrize("feature_stream", ["allow_atomic"], indirect=True)
async def test_a_batch_run_logs_one_row_per_committed_batch(driver, feature_stream):
    """load_batch: each row is one committed batch of batch_size messages, logged with its commit's stream
    sequence (the batch's last message), and the stream holds rows x batch_size messages."""
    js, name, subject = feature_stream
    sub, stopped = await run_request_op(
        driver, "load_batch", subject, 20, rate=0.0, payload_size=16, batch_size=BATCH_SIZE
    )
    stored = (await js.stream_info(name)).state.messages
    assert stored == stopped["acked"] * BATCH_SIZE
    assert sorted(sub.column("stream_seq")) == list(range(BATCH_SIZE, stored + 1, BATCH_SIZE))
    for seq in (1, BATCH_SIZE // 2, BATCH_SIZE):  # the first, a middle and the commit message were all stored
        assert (await js.get_msg(name, seq)).data == b"x" * 16


@pytest_asyncio.fixture
async def bucket(embedded_server):
    nc = await embedded_server.connect()
    js = nc.jetstream()
    name = f"LOADKV_{uuid.uuid4().hex[:8].upper()}"
    await js.create_key_value(api.KeyValueConfig(bucket=name, history=1))
    try:
        yield js, name
    finally:
        await js.delete_key_value(name)
        await nc.close()


@pytest.mark.asyncio
@pytest.mark.parametrize("rate", [500.0, 0.0], ids=["open", "closed"])
async def test_a_kv_run_puts_then_gets_each_key_it_put(driver, bucket, rate):
    """load_kv: operations alternate put and get, every put's revision is one of the bucket's (all of them, in
    order), every get reads the revision the last acknowledged put of its key wrote, and load_stop's counts are
    the rows'."""
    js, name = bucket
    keys = [f"k{i}" for i in range(5)]
    sub = LoadSub(KV_FIELDS)
    driver.route("sub", "k1", sub.take)
    settings = {"rate": rate, "max_inflight": 1, "payload_size": 16, "batch_ms": 50}
    await driver.request("load_kv", session="s1", sub="k1", bucket=name, keys=keys, **settings)
    await sub.wait_rows(200)
    stopped = await driver.request("load_stop", WAIT_S, sub="k1", at_ns=None)
    assert stopped["ops"] == len(sub.rows) == stopped["ok"] + stopped["overflow"], sub.errors
    rows = sub.rows[sub.column("error") == 0]
    rows = rows[np.argsort(rows[:, KV_FIELDS.index("sent_ns")], kind="stable")]
    op, key, revision = (rows[:, KV_FIELDS.index(field)] for field in ("op", "key", "revision"))
    puts = op == KV_OPS.index("kv_put")
    stored = (await js.stream_info(f"KV_{name}")).state.last_seq
    assert sorted(revision[puts]) == list(range(1, stored + 1))
    written: dict[int, int] = {}
    for one_op, one_key, one_revision in zip(op, key, revision, strict=True):
        if one_op == KV_OPS.index("kv_put"):
            written[int(one_key)] = int(one_revision)
        else:
            assert written.get(int(one_key)) == one_revision, "a get did not read its key's last put"
    # even operations put, odd ones get: only an operation that overflowed (open loop, max_inflight 1) or failed,
    # or a get asked for before any put was acknowledged (it puts instead), can tip the balance, by one each
    # (a statistical 0.4-0.6 bound failed at 0.606 on a loaded machine, where more operations overflowed)
    tipped = abs(int(puts.sum()) - int((~puts).sum()))
    assert tipped <= len(sub.rows) - len(rows) + 2, f"puts and gets do not alternate: {puts.sum()} puts of {len(rows)}"


# --- jetcheck load --client X ---------------------------------------------------------------------------------------


def test_jetcheck_load_through_a_driver_logs_every_publish_of_its_schedule(tmp_path, embedded_server, client):
    """`jetcheck load --client X --scenario publish`: the op log holds one row per intended time of the 400/s
    schedule with monotone times, the server stored every acked one, Locust's totals are the op log's, and
    load.json names the client and its exact version."""
    rate = 400
    rc, run, summary, out = run_load(
        tmp_path, embedded_server, "--client", client, "--scenario", "publish", "--rate", str(rate), "--duration", "3s"
    )
    assert rc == 0, summary["checks"]
    assert_no_lost_records(summary)
    ops = ds.dataset(out / "ops", format="parquet").to_table().to_pandas()
    assert set(ops["op"]) == {"publish"} and ops["ok"].all()
    intended = np.sort(ops["intended_ns"].to_numpy())
    assert len(ops) == round((intended[-1] - intended[0]) * rate / NS) + 1, "a scheduled publish is missing"
    assert len(ops) >= rate // 2  # at least half a second of the schedule ran (a driver starts within the 3 s)
    assert (ops["start_ns"] >= ops["intended_ns"]).all() and (ops["end_ns"] >= ops["start_ns"]).all()
    assert locust_totals(out) == (len(ops), 0)
    assert run["client"]["name"] == client
    assert run["client"]["version"] == normalise_version(BUILDS[client][1]())
    assert run["scenario"] == "publish-async"


@pytest.mark.parametrize("scenario", ["end-to-end", "pull-consume"])
def test_jetcheck_load_through_a_driver_consumes_what_it_logs(tmp_path, embedded_server, client, scenario):
    """`jetcheck load --client X` with pull consumers in the driver: the consume rows are the server's acknowledged
    deliveries (and the publish rows its stored messages), no message is consumed twice, Locust's totals are the op
    log's, and stamped messages carry end-to-end latency."""
    # A driver (node above all) takes seconds to start on a busy machine: the publishing run is long enough to
    # leave some of its schedule to consume after that. One process (one driver, both users in it): a Locust master
    # ends the test when its workers miss heartbeats for 3 s, which a loaded 2-core machine does.
    if scenario == "end-to-end":
        settings = ["--rate", "300", "--duration", "6s"]
    else:
        settings = ["--prefill", "2000", "--duration", "3s"]
    rc, run, summary, out = run_load(
        tmp_path,
        embedded_server,
        "--client",
        client,
        "--scenario",
        scenario,
        "--users",
        "2",
        "--processes",
        "1",
        *settings,
    )
    assert rc == 0, summary["checks"]
    assert_no_lost_records(summary)
    assert "consume rows == acknowledged deliveries" in {check["check"] for check in summary["checks"]}
    ops = ds.dataset(out / "ops", format="parquet").to_table().to_pandas()
    consumed = ops[ops["op"] == "consume"]
    assert len(consumed) > 0 and consumed["ok"].all(), ops.groupby(["op", "error_class", "error_code"]).size()
    assert consumed["stream_seq"].is_unique and (consumed["delivery_count"] == 1).all()
    assert locust_totals(out) == (len(ops), 0)
    assert run["client"]["name"] == client
    if scenario == "end-to-end":
        assert (consumed["e2e_ns"] != -1).all() and consumed["e2e_ns"].median() > 0  # two processes' clocks
        assert set(consumed["stream_seq"]) <= set(ops.loc[ops["op"] == "publish", "stream_seq"])


def test_jetcheck_load_through_a_driver_logs_every_kv_operation(tmp_path, embedded_server, client):
    """`jetcheck load --client X --scenario kv`: the put rows are the bucket's revisions, gets and puts both ran
    without errors, Locust's totals are the op log's."""
    rc, run, summary, out = run_load(
        tmp_path,
        embedded_server,
        *("--client", client, "--scenario", "kv", "--rate", "300", "--users", "2", "--processes", "1"),
        *("--duration", "4s"),
    )
    assert rc == 0, summary["checks"]
    assert_no_lost_records(summary)
    ops = ds.dataset(out / "ops", format="parquet").to_table().to_pandas()
    assert set(ops["op"]) == set(KV_OPS) and ops["ok"].all(), ops.groupby(["op", "error_class"]).size()
    assert ops.loc[ops["op"] == "kv_put", "stream_seq"].is_unique
    assert locust_totals(out) == (len(ops), 0)
    assert run["client"]["name"] == client


@pytest.mark.parametrize("scenario", ["counter", "batch-publish"])
def test_jetcheck_load_through_a_driver_counts_increments_and_batches(tmp_path, embedded_server, client, scenario):
    """`jetcheck load --client X --scenario counter|batch-publish`: every row is acked, the record checks hold (the
    counters' values are the acked increments; the stream holds rows x BATCH_SIZE messages), and Locust's totals
    are the op log's."""
    rc, run, summary, out = run_load(
        tmp_path, embedded_server, *("--client", client, "--scenario", scenario, "--duration", "3s")
    )
    assert rc == 0, summary["checks"]
    assert_no_lost_records(summary)
    checks = {check["check"] for check in summary["checks"]}
    wanted = (
        "publish rows == sum of counter values" if scenario == "counter" else "publish rows x 10 == stream messages"
    )
    assert wanted in checks
    ops = ds.dataset(out / "ops", format="parquet").to_table().to_pandas()
    assert set(ops["op"]) == {"publish"} and len(ops) > 0 and ops["ok"].all(), ops.groupby("error_class").size()
    assert ops["stream_seq"].is_unique
    assert locust_totals(out) == (len(ops), 0)
    assert run["client"]["name"] == client and run["scenario"] == scenario


def test_a_driven_client_refuses_a_scenario_it_does_not_run(tmp_path, capsys):
    """A driver publishes async and pull-consumes: `--client nats.go --scenario ordered-consume` is one line and
    exit 2."""
    from jetcheck import cli

    assert cli.main(["load", "--client", "nats.go", "--scenario", "ordered-consume", "--out", str(tmp_path)]) == 2
    assert "runs through nats-py only" in capsys.readouterr().err


def test_a_driven_clients_misbehave_mode_is_refused_for_load(tmp_path, capsys):
    """A driver's misbehave modes are for certify's proofs: `--client nats.go+duplicate-delivery` is one line and
    exit 2 (before ClientSpec, `nats.go+...` read as no driven client, and the load ran through nats-py)."""
    from jetcheck import cli

    argv = ["load", "--client", "nats.go+duplicate-delivery", "--scenario", "publish", "--out", str(tmp_path)]
    assert cli.main(argv) == 2
    assert "a driver's misbehave modes are for certify's proofs, not for load" in capsys.readouterr().err
