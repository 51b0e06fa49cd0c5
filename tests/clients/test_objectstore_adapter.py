"""The adapter's object store section: a driver's not-found answer and ADR-20 ObjectInfo JSON as the checks see them."""

from __future__ import annotations

from jetcheck.conformance.clients.base import ObjectInfo, ObjectNotFound
from jetcheck.conformance.clients.driver_pipe import error_for


def test_a_driver_not_found_answer_is_the_adapters_object_not_found():
    """`not_found` (the client's own not-found error, or nats.js's null) reaches the checks as ObjectNotFound."""
    error = error_for(
        "obj_get", {"kind": "not_found", "message": "jetstream.ErrObjectNotFound: nats: object not found"}
    )
    assert isinstance(error, ObjectNotFound)
    assert str(error) == "obj_get: not_found: jetstream.ErrObjectNotFound: nats: object not found"


def test_object_info_reads_adr20_json_and_a_zero_mtime_as_none():
    """The info a client returned, as ADR-20 lays it out (nats.go's zero mtime is absent, not a time)."""
    info = ObjectInfo.from_json(
        {
            "name": "docs/report.txt",
            "bucket": "b",
            "nuid": "N1",
            "size": 1000,
            "chunks": 1,
            "digest": "SHA-256=abc",
            "deleted": True,
            "mtime": "",
            "options": {"max_chunk_size": 4096},
        }
    )
    assert info == ObjectInfo("docs/report.txt", "b", "N1", 1000, 1, "SHA-256=abc", True, None, "")
