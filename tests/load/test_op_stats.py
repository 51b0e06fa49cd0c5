"""What a load user hands Locust per interval (load.users.OpStats): each kind of error with its own count."""

from __future__ import annotations

from nats.errors import TimeoutError as NatsTimeout
from nats.js.errors import APIError

from jetcheck.load.users import DriverOpFailed, OpStats


def test_each_kind_of_error_is_a_failure_of_its_own_with_its_count():
    """Errors of different classes in one interval are reported each with its own exception and count (Locust keys
    its failure table by the exception), not all as the interval's last error."""
    stats = OpStats()
    stats.fail(NatsTimeout())
    stats.fail(APIError(code=503, description="no leader"), 2)
    stats.fail(NatsTimeout())
    reported = {type(error).__name__: count for error, count in stats.failures()}
    assert reported == {"TimeoutError": 2, "APIError": 2}


def test_a_driven_clients_error_classes_stay_apart():
    """A driven client's failures (one wrapper class, the client's error class as its message) are counted per
    client error class."""
    stats = OpStats()
    stats.fail(DriverOpFailed("ErrTimeout"), 3)
    stats.fail(DriverOpFailed("ErrNoResponders"), 1)
    reported = {str(error): count for error, count in stats.failures()}
    assert reported == {"ErrTimeout": 3, "ErrNoResponders": 1}
