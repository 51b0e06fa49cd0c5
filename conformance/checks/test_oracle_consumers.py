"""Oracles for consumers over generated streams, in SQLancer's shapes: consumers on disjoint filters together deliver
what one consumer on their union delivers (partitioning), and a consumer or read built to find a stored message
finds it (pivoted)."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from jetcheck.conformance.oracle_runs import PROPERTY_TIMEOUT_S, failure, fresh_stream
from jetcheck.conformance.programs import SETUPS, header_programs
from jetcheck.conformance.read_paths import Reads, Record, rfc3339_of_ns, shown
from jetcheck.conformance.replay import replay

STORAGES = pytest.mark.parametrize("storage", ["file", "memory"])
LONG = pytest.mark.timeout(PROPERTY_TIMEOUT_S)
# A filter, and ways to split it into disjoint filters that together match the same subjects (SUBJECTS: a, b, c.x, c.y)
PARTITIONS = {
    ">": (("a", "b", "c.>"), ("a", "b", "c.x", "c.y"), ("*", "c.*")),
    "c.>": (("c.x", "c.y"),),
    "*": (("a", "b"),),
}
SPLITS = st.sampled_from([(whole, parts) for whole, splits in PARTITIONS.items() for parts in splits])
# Deliver policies that select per subject, so a partition of the filter partitions what they deliver ("last" and
# "new" do not: one last message, or none, for any filter)
POLICIES = st.sampled_from(("all", "last_per_subject", "by_start_sequence"))


def _config(setup, storage: str) -> dict:
    return {"storage": storage, "allow_direct": True, **setup.config()}


def _policy(policy: str, start: int) -> dict:
    return {"deliver_policy": policy, **({"opt_start_seq": start} if policy == "by_start_sequence" else {})}


@pytest.mark.rule("oracle.partitioned-consumers")
@STORAGES
@LONG
def test_consumers_on_disjoint_filters_deliver_together_what_one_on_their_union_delivers(oracle, names, storage):
    """Consumers on disjoint filters together deliver, once each, what a consumer on their union delivers, with one
    filter or with the parts as filter_subjects; their num_pending add up to the union's."""
    drawn = st.tuples(st.tuples(SPLITS, POLICIES, st.integers(1, 12)), SETUPS).flatmap(
        lambda case: st.tuples(st.just(case[0]), st.just(case[1]), header_programs(case[1]))
    )

    async def example(nc, drawn) -> None:
        ((whole, parts), policy, start), setup, program = drawn
        config = _config(setup, storage)
        async with fresh_stream(nc, names, config) as stream:
            await replay(nc, stream.name, stream.root, program)
            reads, deliver = Reads(nc, stream.name, False), _policy(policy, start)
            full = [f"{stream.root}.{p}" for p in parts]
            one, one_pending = await reads.delivered(filter_subject=f"{stream.root}.{whole}", **deliver)
            many, many_pending = await reads.delivered(filter_subjects=full, **deliver)
            pieces = [await reads.delivered(filter_subject=f, **deliver) for f in full]
            merged = sorted((r for records, _ in pieces for r in records), key=lambda r: r.seq)
            found = []
            if one != merged:
                found.append(f"a consumer on {whole} delivered {shown(one)}; on {parts} apart, {shown(merged)}")
            if many != merged:
                found.append(f"a consumer on filter_subjects {parts} delivered {shown(many)}; apart, {shown(merged)}")
            pending = [p for _, p in pieces]
            if not one_pending == many_pending == sum(pending):
                found.append(f"num_pending: {one_pending} on {whole}, {many_pending} on {parts}, {pending} apart")
            what = f"consumers ({deliver}) on {parts} partition a consumer on {whole}"
            assert not found, failure(what, config, program, found)

    oracle(drawn, example)


def _pivoted_consumers(walk: list[Record], pivot: Record) -> list[tuple[dict, list[Record]]]:
    """Consumers built around `pivot`, each with what it must deliver first (last_per_subject: all it delivers)."""
    same = [r for r in walk if r.subject == pivot.subject]
    on = {"filter_subject": pivot.subject}
    return [
        ({"deliver_policy": "by_start_sequence", "opt_start_seq": pivot.seq, **on}, [pivot]),
        (
            {"deliver_policy": "by_start_time", "opt_start_time": rfc3339_of_ns(pivot.time_ns), **on},
            [next(r for r in same if r.time_ns >= pivot.time_ns)],
        ),
        ({"deliver_policy": "last_per_subject", **on}, same[-1:]),
    ]


@pytest.mark.rule("oracle.pivoted-reads")
@STORAGES
@LONG
def test_a_consumer_or_read_built_to_find_a_stored_message_finds_it(oracle, names, storage):
    """For any stored message, a consumer on its subject from its sequence or its time delivers it first, a
    last_per_subject consumer delivers the subject's last, and DIRECT.GET next_by_subj from its sequence returns it."""
    drawn = st.tuples(st.integers(0, 1000), SETUPS).flatmap(
        lambda case: st.tuples(st.just(case[0]), st.just(case[1]), header_programs(case[1]))
    )

    async def example(nc, drawn) -> None:
        pick, setup, program = drawn
        config = _config(setup, storage)
        async with fresh_stream(nc, names, config) as stream:
            steps = await replay(nc, stream.name, stream.root, program)
            reads = Reads(nc, stream.name, False)
            walk = await reads.walk(steps[-1].after.first_seq, steps[-1].after.last_seq)
            if not walk:
                return
            pivot = walk[pick % len(walk)]
            found = []
            for consumer, wanted in _pivoted_consumers(walk, pivot):
                got, _ = await reads.delivered(**consumer)
                got = got[: len(got) if consumer["deliver_policy"] == "last_per_subject" else 1]
                if got != wanted:
                    found.append(f"a consumer {consumer} delivered {shown(got)} first, not {shown(wanted)}")
            direct = {"seq": pivot.seq, "next_by_subj": pivot.subject}
            got, _ = await reads.direct(direct)
            if got != [pivot]:
                found.append(f"DIRECT.GET {direct} answered {shown(got)}, not {shown([pivot])}")
            assert not found, failure(f"reads built around stored message {pivot}", config, program, found)

    oracle(drawn, example)
