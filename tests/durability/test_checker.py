"""The durability checker on synthetic histories: each anomaly is detected, counted and shown; a clean history holds."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jetcheck.conformance.catalog import rules_checked_by
from jetcheck.durability import checker as rules
from jetcheck.durability.checker import History, check_history, summary
from jetcheck.durability.history import (
    DeleteRecord,
    DeliveryRecord,
    LeaderClaim,
    PublishRecord,
    PurgeRecord,
    StoredMessage,
)
from jetcheck.durability.leaders import leader_changes, leader_claims

NODES = ("n1", "n2", "n3")


def publisher_of(write: str) -> int:
    """p<publisher>-<n>'s publisher, as the workload numbers them."""
    return int(write[1:].partition("-")[0])


def acked(write: str, seq: int, msg_id: str = "") -> PublishRecord:
    return PublishRecord(publisher_of(write), write, msg_id, 1, "ok", seq)


def timed_out(write: str, msg_id: str = "") -> PublishRecord:
    return PublishRecord(publisher_of(write), write, msg_id, 1, "unknown", error="TimeoutError")


def stored(node: str, pairs: list[tuple[int, str]]) -> list[StoredMessage]:
    return [StoredMessage(node, seq, write, "") for seq, write in pairs]


def history(publishes, stream: list[tuple[int, str]], **changes) -> History:
    """Every node holds `stream` and the consumer received all of it, unless `changes` says otherwise."""
    base = History(
        publishes=list(publishes),
        deliveries=[DeliveryRecord(seq, write, "", 1, 0) for seq, write in stream],
        reads={node: stored(node, stream) for node in NODES},
        reference="n1",
        node_states={node: {"messages": len(stream), "first_seq": 1, "last_seq": len(stream)} for node in NODES},
    )
    return replace(base, **changes)


CLEAN = [acked("p0-0", 1, "p0-0"), acked("p1-0", 2), acked("p0-1", 3, "p0-1"), acked("p1-1", 4)]
CLEAN_STREAM = [(1, "p0-0"), (2, "p1-0"), (3, "p0-1"), (4, "p1-1")]


def failing(findings) -> dict[str, int]:
    return {rule: finding.count for rule, finding in findings.items() if not finding.holds}


def test_a_clean_history_holds_every_rule():
    """Acked writes stored once, in order, on every node, all delivered: every rule holds."""
    findings = check_history(history(CLEAN, CLEAN_STREAM))
    assert set(findings) == set(rules.RULES)
    assert failing(findings) == {}
    assert findings[rules.ACKED_SURVIVE].figures["acked"] == 4


def test_a_lost_acknowledged_write_fails_acked_survive_crash():
    """An acked write missing after healing is lost, named with the sequence its PubAck gave."""
    stream = [pair for pair in CLEAN_STREAM if pair[1] != "p0-1"]
    findings = check_history(history(CLEAN, stream))
    assert findings[rules.ACKED_SURVIVE].count == 1
    assert findings[rules.ACKED_SURVIVE].examples == ("p0-1 acked at seq 3, absent",)
    assert findings[rules.CONTIGUOUS].count == 1  # its sequence is now a hole


def test_an_acked_write_stored_at_another_sequence_is_counted_moved():
    """A write acked at one sequence but stored at another breaks the ack's promise."""
    stream = [(1, "p0-0"), (2, "p1-0"), (3, "p1-1"), (4, "p0-1")]
    finding = check_history(history(CLEAN, stream))[rules.ACKED_SURVIVE]
    assert finding.count == 2 and finding.figures["moved"] == 2


def test_a_message_id_stored_twice_fails_dedup():
    """A retried message id stored at two sequences is a duplicate inside the window."""
    publishes = [*CLEAN, PublishRecord(0, "p0-1", "p0-1", 2, "ok", 5, duplicate=False)]
    stream = [*CLEAN_STREAM, (5, "p0-1")]
    findings = check_history(history(publishes, stream))
    assert failing(findings) == {rules.DEDUP: 1}
    assert findings[rules.DEDUP].examples == ("msg id p0-1 stored at seqs 3, 5",)


def test_a_divergent_replica_fails_replicas_agree():
    """A node serving another message at a sequence, and a replica whose state differs, both disagree."""
    divergent = {**{n: stored(n, CLEAN_STREAM) for n in NODES}, "n3": stored("n3", [*CLEAN_STREAM[:3], (4, "p9-9")])}
    states = {n: {"messages": 4, "first_seq": 1, "last_seq": 4} for n in NODES}
    states["n2"] = {"messages": 3, "first_seq": 1, "last_seq": 3}
    findings = check_history(history(CLEAN, CLEAN_STREAM, reads=divergent, node_states=states))
    assert failing(findings) == {rules.REPLICAS_AGREE: 2}
    assert "seq 4: n1 has 'p1-1', n3 has 'p9-9'" in findings[rules.REPLICAS_AGREE].examples


def test_a_replica_holding_the_same_writes_in_another_order_diverges_though_the_reader_saw_every_write():
    """Divergence is a failure even when the consumer received every acked write and the leader holds them all: a
    replica with writes 3 and 4 swapped fails replicas-agree, and nothing else fails."""
    swapped = stored("n3", [*CLEAN_STREAM[:2], (3, "p1-1"), (4, "p0-1")])
    findings = check_history(history(CLEAN, CLEAN_STREAM, reads={**history(CLEAN, CLEAN_STREAM).reads, "n3": swapped}))
    assert failing(findings) == {rules.REPLICAS_AGREE: 2}
    assert findings[rules.REPLICAS_AGREE].examples[0] == "seq 3: n1 has 'p0-1', n3 has 'p1-1'"


def test_replicas_that_agree_hold_replicas_agree():
    """Every replica with the leader's messages at the leader's sequences: replicas-agree holds."""
    assert check_history(history(CLEAN, CLEAN_STREAM))[rules.REPLICAS_AGREE].holds


def claim(node: str, term: int, at_s: float, group: str = "S-R3F-abc", window_s: float = 0.2) -> LeaderClaim:
    return LeaderClaim(node, group, term, int(at_s * 1e9), int((at_s + window_s) * 1e9))


def test_two_leaders_of_one_group_in_one_term_fail_single_leader_per_term():
    """n1 and n2 both saying they lead the stream's group in term 3 is a split-brain, even in windows apart."""
    claims = [claim("n1", 3, 0.0), claim("n2", 3, 0.1), claim("n1", 3, 5.0), claim("n3", 2, 0.0, group="_meta_")]
    finding = check_history(history(CLEAN, CLEAN_STREAM, leaders=claims))[rules.SINGLE_LEADER]
    assert finding.count == 1
    assert finding.examples == ("group S-R3F-abc term 3 led by 2 nodes: n1 (first at 0.0 s), n2 (first at 0.1 s)",)
    assert finding.figures == {"claims": 4, "groups": 2, "stale_overlaps": 0}


def test_a_leader_handing_over_to_a_new_term_holds_and_counts_the_stale_overlap():
    """An old leader still saying so (term 3) while the new one leads term 4 in an overlapping window is Raft's
    normal handover: it holds, and the overlap is counted, not failed."""
    claims = [claim("n1", 3, 0.0), claim("n1", 3, 1.0, window_s=1.0), claim("n2", 4, 1.5), claim("n2", 4, 3.0)]
    finding = check_history(history(CLEAN, CLEAN_STREAM, leaders=claims))[rules.SINGLE_LEADER]
    assert finding.holds
    assert finding.figures["stale_overlaps"] == 1


def test_leader_claims_are_the_groups_a_raftz_answer_says_the_node_leads():
    """/raftz's account -> group -> {state, term} becomes one claim per group in state LEADER."""
    raftz = {
        "$SYS": {"_meta_": {"state": "LEADER", "term": 2}},
        "$G": {"S-R3F-abc": {"state": "FOLLOWER", "term": 5}, "C-R3F-def": {"state": "LEADER", "term": 1}},
    }
    claims = leader_claims("n1", raftz, 10, 20)
    assert sorted((c.group, c.term) for c in claims) == [("C-R3F-def", 1), ("_meta_", 2)]
    assert {(c.node, c.sent_ns, c.received_ns) for c in claims} == {("n1", 10, 20)}


def test_a_deleted_write_served_again_fails_deleted_stays_deleted():
    """p0-1's deletion at seq 3 was acknowledged, yet n2 serves it after healing: the rule fails, naming the node."""
    deletes = [DeleteRecord("p0-1", 3, "ok")]
    without = [pair for pair in CLEAN_STREAM if pair[1] != "p0-1"]
    reads = {n: stored(n, without) for n in NODES} | {"n2": stored("n2", CLEAN_STREAM)}
    findings = check_history(history(CLEAN, without, reads=reads, deletes=deletes))
    assert findings[rules.DELETED_STAYS].count == 1
    assert findings[rules.DELETED_STAYS].examples == ("p0-1 deleted at seq 3, served by n2 at seq 3",)


def test_a_deleted_write_gone_everywhere_holds_and_is_no_loss_nor_gap():
    """A write deleted (acknowledged) and one whose delete timed out, both absent: every rule holds; the hole at
    their sequences is no gap and they are not lost or undelivered."""
    deletes = [DeleteRecord("p0-1", 3, "ok"), DeleteRecord("p1-0", 2, "unknown", "TimeoutError")]
    stream = [(1, "p0-0"), (4, "p1-1")]
    h = history(CLEAN, stream, deletes=deletes)
    h = replace(h, node_states={n: {"messages": 2, "first_seq": 1, "last_seq": 4} for n in NODES})
    findings = check_history(h)
    assert failing(findings) == {}
    assert findings[rules.DELETED_STAYS].figures == {"deleted": 1, "delete_requests": 2}


def test_a_purged_write_served_again_fails_purged_stays_purged():
    """A purge of p0's writes below seq 4 was acknowledged, yet n3 serves p0-0 (acked at seq 1) after healing: the
    rule fails, naming the node; p0-1 (seq 3), absent everywhere, is neither lost nor a gap, and p1-0 (seq 2), not
    p0's, is judged as any other."""
    purges = [PurgeRecord(4, 0, "ok")]
    kept = [(2, "p1-0"), (4, "p1-1")]
    reads = {n: stored(n, kept) for n in NODES} | {"n3": stored("n3", [(1, "p0-0"), *kept])}
    findings = check_history(history(CLEAN, kept, reads=reads, purges=purges))
    assert failing(findings) == {rules.PURGED_STAYS: 1, rules.REPLICAS_AGREE: 1}
    assert findings[rules.PURGED_STAYS].examples == ("p0-0 acked at seq 1, purged below 4, served by n3 at seq 1",)
    assert findings[rules.PURGED_STAYS].figures == {"purged": 2, "purge_requests": 1}
    assert findings[rules.ACKED_SURVIVE].figures["acked"] == 2


@pytest.mark.parametrize(
    ("outcome", "error", "lost"), [("unknown", "TimeoutError", 0), ("error", "404/10059 stream not found", 2)]
)
def test_writes_under_a_purge_not_acknowledged(outcome, error, lost):
    """A purge whose answer never came may or may not have happened: p0's writes under it, absent, fail nothing.
    One the server refused purged nothing: they are lost. Neither counts a write as purged."""
    purges = [PurgeRecord(4, 0, outcome, error)]
    kept = [(2, "p1-0"), (4, "p1-1")]
    h = history(CLEAN, kept, purges=purges)
    h = replace(h, node_states={n: {"messages": 2, "first_seq": 2, "last_seq": 4} for n in NODES})
    findings = check_history(h)
    assert findings[rules.ACKED_SURVIVE].count == lost
    assert findings[rules.PURGED_STAYS].figures == {"purged": 0, "purge_requests": 1}


def test_a_node_that_cannot_be_read_disagrees():
    """A node missing from the final read counts against replicas-agree, with why."""
    reads = {n: stored(n, CLEAN_STREAM) for n in NODES[:2]}
    finding = check_history(history(CLEAN, CLEAN_STREAM, reads=reads, unreadable={"n3": "TimeoutError"}))
    assert finding[rules.REPLICAS_AGREE].examples == ("n3 could not be read: TimeoutError",)


@pytest.mark.parametrize("kept", [True, False], ids=["kept", "absent"])
def test_an_unknown_write_is_never_counted_lost(kept):
    """A timed-out write may be present or absent: every rule holds either way, and the figures say which."""
    publishes = [*CLEAN, timed_out("p1-2")]
    stream = [*CLEAN_STREAM, (5, "p1-2")] if kept else CLEAN_STREAM
    findings = check_history(history(publishes, stream))
    assert failing(findings) == {}
    figures = findings[rules.ACKED_SURVIVE].figures
    assert (figures["unknown_kept"], figures["unknown_absent"]) == ((1, 0) if kept else (0, 1))


def test_a_message_nobody_wrote_fails_no_phantom_writes():
    """A stored payload no publisher sent, and a second copy of a write sent once without an id, are phantoms."""
    stream = [*CLEAN_STREAM, (5, "p7-0"), (6, "p1-0")]
    findings = check_history(history(CLEAN, stream))
    assert failing(findings) == {rules.NO_PHANTOM: 2}


def test_a_later_write_stored_before_an_earlier_one_fails_publisher_order():
    """Write n+1 of a publisher stored below write n is an order violation."""
    publishes = [acked("p0-0", 2), acked("p0-1", 1)]
    findings = check_history(history(publishes, [(1, "p0-1"), (2, "p0-0")]))
    assert failing(findings) == {rules.PUBLISHER_ORDER: 1}


def test_an_undelivered_acked_write_and_a_forgotten_consumer_fail_their_rules():
    """The consumer's info answering 404 after the heal, and an acked write it never delivered, both fail."""
    h = history(CLEAN, CLEAN_STREAM, consumer_error="CONSUMER.INFO answered 404/10014 consumer not found")
    h = replace(h, deliveries=h.deliveries[:2])
    findings = check_history(h)
    assert failing(findings) == {rules.ACKED_DELIVERED: 2, rules.CONSUMER_SURVIVES: 1}
    assert "2 violation(s)" in summary(findings[rules.ACKED_DELIVERED])


def test_a_stream_gone_after_healing_fails_availability_and_loses_every_ack():
    """No node serving the stream: it is unavailable, and every acked write is lost."""
    h = history(CLEAN, [], reads={}, reference="", deliveries=[], node_states={}, stream_error="stream not found")
    findings = check_history(h)
    assert findings[rules.STREAM_AVAILABLE].count == 1
    assert findings[rules.ACKED_SURVIVE].count == 4


def test_the_checker_judges_exactly_the_rules_the_catalog_gives_the_durability_command():
    """Each catalog rule with checked_by = "durability" has a finding, and each finding a catalog rule."""
    assert set(rules_checked_by("durability")) == set(rules.RULES)


def test_leader_changes_are_each_groups_first_leader_then_each_newer_term():
    """A group's first claim is a change, a newer term is one, the same leader again or a stale older term is not;
    another node in the same term is one (the split-brain the checker fails)."""
    claims = [
        claim("n1", 3, 0.0),
        claim("n1", 3, 1.0),
        claim("n2", 4, 2.0),
        claim("n1", 3, 2.5),  # the deposed leader, not yet told
        claim("n3", 4, 3.0),
        LeaderClaim("n1", "_meta_", 1, 0, 10),
    ]
    changes = [(c.kind, c.node, c.term) for c in leader_changes(claims)]
    assert changes == [("meta", "n1", 1), ("stream", "n1", 3), ("stream", "n2", 4), ("stream", "n3", 4)]
