"""The steady window: from a warm-up after the last user started to the first user's stop."""

from __future__ import annotations

import numpy as np
import pytest

from jetcheck.load.window import NS, WARMUP_S, steady_window

T0 = 1_760_000_000 * NS


def test_the_window_starts_a_warm_up_after_the_last_user_started_and_ends_when_the_first_stopped():
    window = steady_window([(T0, T0 + 20 * NS), (T0 + NS // 2, T0 + 20 * NS + 100), (T0 + NS, T0 + 19 * NS)])
    assert (window.start_ns, window.end_ns) == (T0 + NS + int(WARMUP_S * NS), T0 + 19 * NS)
    assert window.seconds == pytest.approx(17.0) and not window.whole_run
    intended = np.array([T0 + 2 * NS - 1, T0 + 2 * NS, T0 + 19 * NS - 1, T0 + 19 * NS])
    assert window.contains(intended).tolist() == [False, True, True, False]


def test_a_short_run_keeps_three_quarters_of_the_time_all_users_ran():
    window = steady_window([(T0, T0 + 2 * NS), (T0 + NS, T0 + 3 * NS)])
    assert (window.warmup_s, window.start_ns, window.end_ns) == (0.25, T0 + NS + NS // 4, T0 + 2 * NS)


def test_users_that_never_ran_together_leave_the_whole_run_and_say_so():
    window = steady_window([(T0, T0 + NS), (T0 + 2 * NS, T0 + 3 * NS)])
    assert window.whole_run and (window.start_ns, window.end_ns) == (T0, T0 + 3 * NS + 1)
    described = window.describe(0, 10, 0)
    assert described["definition"].startswith("No steady window: the 2 users never all ran at once")


def test_the_description_counts_what_the_window_leaves_out():
    described = steady_window([(T0, T0 + 10 * NS)]).describe(2000, 18_000, 3)
    assert (described["warmup_ops"], described["steady_ops"], described["winddown_ops"]) == (2000, 18_000, 3)
    assert "the 9.0 s from 1.0 s after the user started until it stopped" in described["definition"]
    assert "The 2,000 operations sent before it (warm-up) and the 3 after it (wind-down)" in described["definition"]


def test_no_operations_no_window():
    assert steady_window([]) is None
