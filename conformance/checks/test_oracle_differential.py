"""Differential oracles: configurations the documents call equivalent must give the same observable results for the
same generated program, without a model of what those results are. File and memory storage, R1 and R3 on a
cluster, and a stream updated to a configuration against one created with it."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from jetcheck.conformance.jsapi import NS, ApiError, api
from jetcheck.conformance.oracle_runs import PROPERTY_TIMEOUT_S, failure, fresh_stream
from jetcheck.conformance.outcomes import Outcome, left_open, outcome
from jetcheck.conformance.programs import Operation, Setup, header_programs

LONG = pytest.mark.timeout(PROPERTY_TIMEOUT_S)
PROGRAMS = st.tuples(st.just(Setup(allow_rollup=True)), header_programs(Setup(allow_rollup=True)))
# What the docs' configuration table marks editable (streams.update-editable), in values a short program meets;
# deny_delete and deny_purge may be turned on only (streams.update-one-way-flags)
EDITABLE = st.fixed_dictionaries(
    {
        "max_msgs": st.sampled_from((-1, 3, 6)),
        "max_msgs_per_subject": st.sampled_from((-1, 1, 2)),
        "max_msg_size": st.sampled_from((-1, 512)),
        "discard": st.sampled_from(("old", "new")),
        "allow_rollup_hdrs": st.booleans(),
        "allow_direct": st.booleans(),
        "duplicate_window": st.sampled_from((60 * NS, 120 * NS)),
        "description": st.sampled_from(("", "before", "after")),
    }
)
ONE_WAY = st.fixed_dictionaries({"deny_delete": st.booleans(), "deny_purge": st.booleans()})
SETTLED_APART = ("name", "subjects")  # the two streams of a comparison differ in these by construction


async def _on(nc, names, config: dict, program: list[Operation]) -> Outcome:
    async with fresh_stream(nc, names, config) as stream:
        return await outcome(nc, stream.name, stream.root, program)


def _equivalent(oracle, names, sides: dict[str, dict], what: str) -> None:
    """Every program gets the same outcome on the two `sides` (label -> the config that sets it apart)."""
    (one, one_config), (other, other_config) = sides.items()

    async def example(nc, drawn) -> None:
        setup, program = drawn
        config = setup.config()
        first = await _on(nc, names, {**one_config, **config}, program)
        second = await _on(nc, names, {**other_config, **config}, program)
        found = first.differences(second, program, (one, other), left_open(setup, program))
        assert not found, failure(what, config, program, found)

    oracle(PROGRAMS, example)


@pytest.mark.rule("oracle.storage-equivalent")
@LONG
def test_file_and_memory_storage_give_the_same_results(oracle, names):
    """The same program on a file and a memory stream gets the same answers and leaves the same messages and state."""
    sides = {"file": {"storage": "file"}, "memory": {"storage": "memory"}}
    _equivalent(oracle, names, sides, "file and memory storage give the same results")


@pytest.mark.rule("oracle.replicas-equivalent")
@pytest.mark.needs("cluster")
@LONG
def test_one_and_three_replicas_give_the_same_results(oracle, names):
    """On a cluster, the same program on an R1 and an R3 stream gets the same answers and leaves the same messages."""
    _equivalent(
        oracle, names, {"R1": {"num_replicas": 1}, "R3": {"num_replicas": 3}}, "R1 and R3 give the same results"
    )


def _settled(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in SETTLED_APART}


@pytest.mark.rule("oracle.update-as-create")
@LONG
def test_a_stream_updated_to_a_configuration_behaves_as_one_created_with_it(oracle, names):
    """A stream updated to editable configuration C reports C as a stream created with C does, and then gets the
    same answers and keeps the same messages for the same program."""
    drawn = (
        st.tuples(EDITABLE, EDITABLE, ONE_WAY, PROGRAMS)
        .map(lambda t: (t[0], t[1] | t[2], t[3][1]))
        .filter(lambda t: not (t[1]["allow_rollup_hdrs"] and t[1]["deny_purge"]))  # refused on create too: 10052
    )

    async def example(nc, drawn) -> None:
        before, after, program = drawn
        async with fresh_stream(nc, names, {"storage": "file", **before}, tag="U") as updated:
            body = {"name": updated.name, "subjects": [f"{updated.root}.>"], "storage": "file", **after}
            try:
                settled = (await api(nc, f"$JS.API.STREAM.UPDATE.{updated.name}", body))["config"]
            except ApiError as error:
                pytest.fail(
                    f"an update from {before} to {after} changes only fields the docs mark editable; the server "
                    f"refused it: {error}"
                )
            async with fresh_stream(nc, names, {"storage": "file", **after}, tag="C") as created:
                reported = (await api(nc, f"$JS.API.STREAM.INFO.{created.name}"))["config"]
                found = [
                    f"config {key}: updated {settled.get(key)!r}, created {reported.get(key)!r}"
                    for key in sorted(_settled(settled).keys() | _settled(reported).keys())
                    if settled.get(key) != reported.get(key)
                ]
                found += (await outcome(nc, updated.name, updated.root, program)).differences(
                    await outcome(nc, created.name, created.root, program), program, ("updated", "created")
                )
        what = f"a stream updated from {before} to C behaves as one created with C"
        assert not found, failure(what, {"storage": "file", **after}, program, found)

    oracle(drawn, example)
