"""The load loop's selector keeps BaseSelector's contract on its own (no private selectors base class)."""

from __future__ import annotations

import selectors
import socket

import pytest

from jetcheck.load.bridge import CooperativeEpollSelector


def test_a_registered_socket_is_selected_when_ready_and_forgotten_once_unregistered():
    """Ready sockets come back with their key and events; get_key and unregister follow BaseSelector."""
    left, right = socket.socketpair()
    with CooperativeEpollSelector() as selector, left, right:
        key = selector.register(left, selectors.EVENT_READ, "data")
        assert selector.get_key(left) is key is selector.get_key(left.fileno())
        assert selector.select(0) == []
        right.send(b"x")
        assert selector.select(1.0) == [(key, selectors.EVENT_READ)]
        with pytest.raises(KeyError, match="already registered"):
            selector.register(left.fileno(), selectors.EVENT_READ)
        modified = selector.modify(left, selectors.EVENT_READ | selectors.EVENT_WRITE, "more")
        assert (modified.events, modified.data, len(selector.get_map())) == (3, "more", 1)
        selector.unregister(left)
        with pytest.raises(KeyError):
            selector.get_key(left)
        assert selector.select(0) == []
