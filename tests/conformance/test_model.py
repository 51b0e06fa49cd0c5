"""The reference model of publish, dedup and purge."""

from __future__ import annotations

import pytest

from jetcheck.conformance.model import SEQ_AND_KEEP, PubAck, PurgeResult, StreamModel, subject_matches


@pytest.mark.parametrize(
    ("pattern", "subject", "matches"),
    [
        ("a", "a", True),
        ("a", "b", False),
        ("a.*", "a.b", True),
        ("a.*", "a.b.c", False),
        ("a.>", "a.b.c", True),
        ("a.>", "a", False),
        ("*", "a", True),
        ("*", "a.b", False),
        (">", "a.b", True),
        ("*.b", "a.b", True),
    ],
)
def test_subject_matching_follows_nats_wildcards(pattern, subject, matches):
    """`*` matches exactly one token and `>` one or more trailing tokens."""
    assert subject_matches(pattern, subject) is matches


def _filled(*subjects: str) -> StreamModel:
    model = StreamModel()
    for subject in subjects:
        model.publish(subject, b"")
    return model


class TestPublish:
    def test_sequences_increase_and_ids_deduplicate(self):
        """A repeated id is a duplicate of its original sequence and stores nothing."""
        model = StreamModel()
        assert model.publish("a", b"1", "x") == PubAck(1, False)
        assert model.publish("a", b"2") == PubAck(2, False)
        assert model.publish("b", b"other payload", "x") == PubAck(1, True)
        assert model.state().messages == 2

    def test_ids_survive_a_purge(self):
        """A purge does not forget ids."""
        model = StreamModel()
        model.publish("a", b"", "x")
        model.purge()
        assert model.publish("a", b"", "x") == PubAck(1, True)


class TestPurge:
    def test_plain_purge_empties_and_moves_first_past_last(self):
        """A plain purge removes everything and first = last + 1."""
        model = _filled("a", "b", "a")
        assert model.purge() == PurgeResult(3)
        state = model.state()
        assert (state.messages, state.first_seq, state.last_seq) == (0, 4, 3)

    def test_seq_keeps_that_sequence_and_later(self):
        """seq N removes everything below N; seq 1 removes nothing."""
        model = _filled("a", "b", "a", "c")
        assert model.purge(seq=1) == PurgeResult(0)
        assert model.purge(seq=3) == PurgeResult(2)
        assert list(model.messages) == [3, 4]

    def test_keep_leaves_the_newest(self):
        """keep N leaves the newest N; keep at or above the count removes nothing."""
        model = _filled("a", "b", "a", "c")
        assert model.purge(keep=10) == PurgeResult(0)
        assert model.purge(keep=1) == PurgeResult(3)
        assert list(model.messages) == [4]

    def test_filter_with_keep_counts_only_matching_messages(self):
        """filter + keep N leaves the newest N matching and every other message."""
        model = _filled("a.x", "b", "a.y", "a.x")
        assert model.purge(filter="a.*", keep=1) == PurgeResult(2)
        assert [m.subject for m in model.messages.values()] == ["b", "a.x"]
        assert model.state().first_seq == 2

    def test_filter_with_seq_removes_matching_below_seq(self):
        """filter + seq N removes matching messages below N only."""
        model = _filled("a", "b", "a", "a")
        assert model.purge(filter="a", seq=4) == PurgeResult(2)
        assert list(model.messages) == [2, 4]

    def test_seq_with_keep_is_an_error_and_changes_nothing(self):
        """seq and keep together are rejected with 10003."""
        model = _filled("a", "b")
        assert model.purge(seq=2, keep=1) == PurgeResult(err_code=SEQ_AND_KEEP)
        assert model.state().messages == 2
