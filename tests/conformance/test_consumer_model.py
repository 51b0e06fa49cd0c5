"""The reference model of a pull consumer: deliveries, acknowledgements and consumer info."""

from __future__ import annotations

import pytest

from jetcheck.conformance.consumer_model import (
    ConsumerConfig,
    ConsumerModel,
    ConsumerState,
    Delivery,
    between,
    exactly,
    shown,
)
from jetcheck.conformance.model import StreamModel


def _stream(*subjects: str) -> StreamModel:
    stream = StreamModel()
    for subject in subjects:
        stream.publish(subject, b"")
    return stream


def _consumer(*subjects: str, **config) -> ConsumerModel:
    return ConsumerModel(_stream(*subjects), ConsumerConfig(**config))


def _pull(model: ConsumerModel, batch: int) -> list[Delivery]:
    """Deliver what a pull of `batch` brings, taking the first candidate each time (new messages in stream order)."""
    return [model.deliver(model.candidates()[0]) for _ in range(model.pull(batch))]


def _seqs(deliveries: list[Delivery]) -> list[int]:
    return [d.seq for d in deliveries]


class TestDeliverPolicies:
    def test_all_starts_at_the_first_message(self):
        """Deliver all delivers every message in stream order."""
        assert _seqs(_pull(_consumer("a", "b", "a"), 10)) == [1, 2, 3]

    def test_last_starts_at_the_last_message(self):
        """Deliver last starts at the last message, or the last matching the filter."""
        assert _seqs(_pull(_consumer("a", "b", "a", deliver_policy="last"), 10)) == [3]
        assert _seqs(_pull(_consumer("a", "b", "a", deliver_policy="last", filters=("b",)), 10)) == [2]

    def test_last_with_nothing_matching_waits_for_the_next_match(self):
        """A last consumer whose filter matches nothing delivers the next matching message."""
        model = _consumer("a", deliver_policy="last", filters=("b",))
        assert model.pull(1) == 0
        model.stream.publish("b", b"")
        assert _seqs(_pull(model, 10)) == [2]

    def test_new_delivers_only_later_messages(self):
        """Deliver new ignores what the stream held at create."""
        model = _consumer("a", "b", deliver_policy="new")
        assert model.pull(5) == 0
        model.stream.publish("a", b"")
        assert _seqs(_pull(model, 5)) == [3]

    def test_by_start_sequence_starts_there(self):
        """by_start_sequence starts at opt_start_seq, also beyond the last message."""
        assert _seqs(_pull(_consumer("a", "b", "c.x", deliver_policy="by_start_sequence", opt_start_seq=2), 9)) == [
            2,
            3,
        ]
        beyond = _consumer("a", deliver_policy="by_start_sequence", opt_start_seq=3)
        beyond.stream.publish("a", b"")
        beyond.stream.publish("a", b"")
        assert _seqs(_pull(beyond, 9)) == [3]

    def test_last_per_subject_delivers_each_subjects_last_then_everything_new(self):
        """last_per_subject delivers the last message of each matching subject, then every later message."""
        model = _consumer("a", "c.x", "a", "c.y", "c.x", deliver_policy="last_per_subject", filters=("c.*",))
        assert _seqs(_pull(model, 1)) == [4]
        model.stream.publish("c.y", b"")
        model.stream.publish("c.y", b"")
        assert _seqs(_pull(model, 9)) == [5, 6, 7]

    def test_filters_select_matching_subjects(self):
        """filter_subject and filter_subjects deliver only matching messages, in stream order."""
        assert _seqs(_pull(_consumer("a", "b", "c.x", "c.y", filters=("c.*",)), 9)) == [3, 4]
        assert _seqs(_pull(_consumer("a", "b", "c.x", "c.y", filters=("a", "c.x")), 9)) == [1, 3]


class TestAcknowledgements:
    def test_explicit_ack_acknowledges_one(self):
        """With ack explicit, acking a later message leaves the earlier one pending and the floor below it."""
        model = _consumer("a", "a", "a")
        _pull(model, 3)
        model.ack(2)
        assert model.pending() == [1, 3]
        expected = model.expected()
        assert (expected.ack_floor_consumer_seq, expected.num_ack_pending) == (exactly(0), exactly(2))
        model.ack(1)
        assert model.expected().ack_floor_consumer_seq == exactly(2)
        assert model.expected().ack_floor_stream_seq == exactly(2)

    def test_ack_all_acknowledges_everything_before(self):
        """With ack all, acking message n acknowledges every delivered message up to n."""
        model = _consumer("a", "a", "a", ack_policy="all")
        _pull(model, 3)
        model.ack(2)
        assert model.pending() == [3]
        assert model.expected().ack_floor_consumer_seq == exactly(2)

    def test_ack_none_has_nothing_pending(self):
        """With ack none, a delivered message is acknowledged: the floor follows the deliveries."""
        model = _consumer("a", "b", ack_policy="none")
        _pull(model, 2)
        expected = model.expected()
        assert (expected.num_ack_pending, expected.ack_floor_consumer_seq) == (exactly(0), exactly(2))

    def test_nak_redelivers_with_a_higher_count(self):
        """A nak'ed message may come again, counted as delivered twice, under a new consumer sequence."""
        model = _consumer("a", "a")
        _pull(model, 1)
        model.nak(1)
        assert model.candidates() == [1, 2]
        assert model.deliver(1) == Delivery(1, "a", 2, 2)
        expected = model.expected()
        assert (expected.num_redelivered, expected.delivered_consumer_seq) == (exactly(1), exactly(2))

    def test_redeliveries_and_new_messages_come_in_any_order(self):
        """The documents do not order a redelivery against the next new message: either may come."""
        model = _consumer("a", "a", "a")
        _pull(model, 2)
        model.nak(1)
        assert model.candidates() == [1, 3]
        assert model.deliver(3) == Delivery(3, "a", 1, 3)
        assert model.deliver(1) == Delivery(1, "a", 2, 4)
        with pytest.raises(ValueError, match="not among the candidates"):
            model.deliver(2)

    def test_term_stops_redelivery(self):
        """A terminated message is neither pending nor redelivered."""
        model = _consumer("a")
        _pull(model, 1)
        model.nak(1)
        model.term(1)
        assert (model.candidates(), model.pending()) == ([], [])

    def test_in_progress_changes_nothing_observable(self):
        """+WPI restarts a timer no program outlasts."""
        model = _consumer("a")
        _pull(model, 1)
        before = model.expected()
        model.in_progress(1)
        assert model.expected() == before

    def test_acking_again_changes_nothing(self):
        """A second ack of an acknowledged message has no effect."""
        model = _consumer("a", "a")
        _pull(model, 2)
        model.ack(1)
        before = model.expected()
        model.ack(1)
        assert model.expected() == before

    def test_max_deliver_stops_redelivery(self):
        """A message delivered max_deliver times and nak'ed is not redelivered; its pending state is left open."""
        model = _consumer("a", max_deliver=2)
        _pull(model, 1)
        model.nak(1)
        _pull(model, 1)
        model.nak(1)
        assert model.pull(4) == 0
        expected = model.expected()
        assert expected.num_ack_pending == between(0, 1)
        assert expected.ack_floor_consumer_seq is None

    def test_max_deliver_one_never_redelivers(self):
        """With max_deliver 1 a nak'ed message is never redelivered nor counted as redelivered."""
        model = _consumer("a", max_deliver=1)
        _pull(model, 1)
        model.nak(1)
        assert model.pull(1) == 0
        assert model.expected().num_redelivered == exactly(0)


class TestConsumerInfo:
    def test_pending_counts_matching_messages_not_yet_delivered(self):
        """num_pending counts the matching messages still to deliver; delivered seqs count every delivery."""
        model = _consumer("a", "b", "a", filters=("a",))
        assert model.expected().num_pending == exactly(2)
        _pull(model, 1)
        expected = model.expected()
        assert (expected.num_pending, expected.delivered_consumer_seq) == (exactly(1), exactly(1))
        # the position may have moved past the non-matching message 2
        assert expected.delivered_stream_seq == between(1, 2)

    def test_last_per_subject_pending_allows_both_readings(self):
        """last_per_subject's num_pending is either the messages to deliver or the subjects whose last is ahead."""
        model = _consumer("a", deliver_policy="last_per_subject", filters=("a",))
        model.stream.publish("a", b"")
        assert model.expected().num_pending == frozenset({1, 2})

    def test_differences_name_the_fields_the_rules_do_not_allow(self):
        """A reported value outside the allowed ones is named with both sides; unspecified fields are not compared."""
        model = _consumer("a")
        state = ConsumerState(0, 0, 0, 0, num_pending=2, num_ack_pending=0, num_redelivered=0, num_waiting=0)
        assert model.expected().differences(state) == {"num_pending": "the rules give 1, the server has 2"}

    def test_state_reads_consumer_info(self):
        """ConsumerState takes its counters from a CONSUMER.INFO reply."""
        info = {
            "delivered": {"consumer_seq": 3, "stream_seq": 5},
            "ack_floor": {"consumer_seq": 1, "stream_seq": 2},
            "num_pending": 4,
            "num_ack_pending": 2,
            "num_redelivered": 1,
            "num_waiting": 0,
        }
        assert ConsumerState.of(info) == ConsumerState(3, 5, 1, 2, 4, 2, 1, 0)

    def test_allowed_values_are_shown_compactly(self):
        """One value, a range, a set, or unspecified."""
        assert [shown(exactly(3)), shown(between(1, 4)), shown(frozenset({1, 3})), shown(None)] == [
            "3",
            "1..4",
            "{1, 3}",
            "unspecified",
        ]


def test_config_names_filters_under_the_stream_root():
    """One filter is filter_subject, more are filter_subjects, both under the stream's root."""
    one = ConsumerConfig(filters=("a",)).config("r")
    two = ConsumerConfig(deliver_policy="by_start_sequence", filters=("a", "c.>"), opt_start_seq=2).config("r")
    assert one["filter_subject"] == "r.a" and "filter_subjects" not in one
    assert two["filter_subjects"] == ["r.a", "r.c.>"] and two["opt_start_seq"] == 2
