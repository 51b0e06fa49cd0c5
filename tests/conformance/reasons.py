"""Why the proof rows' checks fail: the words a failing check's message carries when a row breaks its rule.

A proof row proves a rule only when the rule's checks fail for the rule's reason: the assertion written for it,
not an unexpected exception or another assertion on the way (proofs.wrong_reasons). REASONS holds each rule's usual
reason: a fragment every proof run's failure of its checks carried. ROW_REASONS holds a row's own, where its
breakers make the checks fail in other words (a row id -> rule -> fragment, or fragments one of which each check
carries). A row may also name them itself (`reasons=`). The proof gate refuses a row with a rule it names no reason
for.

The fragments were taken mechanically from the failure messages of a full proof run (2026-11-26): the longest
literal words every failure of the rule's checks under the row shared, without run prefixes, timings, numbers and
quoted values, at most 55 characters. Some are therefore terse (a piece of the assertion's own source, for a bare
assert, or a word cut short); they pin the assertion a check failed at, and a new proof run tells when one no longer
holds. Where a check's failure is the client's or server's own refusal (an exception where the rule wants success),
the fragment is the refusal's words, never its exception class: the refusal is the deviation, a crash elsewhere is
not.

The KV and object store client rules' fragments (kv.put-get, kv.create-client, kv.update-client, kv.get-missing,
kv.direct-get and objectstore.put-get, chunking, digest-verified, replace, delete, rename, link-get, add-link-rules)
were written by hand instead: those checks word a client's refusal or failure themselves (conformance/checks/answers.py:
what ADR-8 or ADR-20 documents, then the client's operation and its own words), so each fragment is the documented
part of the assertion the row fails at, and an uncaught exception carries none of them. So were those of the checks
that failed through an uncaught exception before they said it in words: the pull statuses ("documented status"), the
stream creates and updates that must be refused or must succeed, MSG.GET and DIRECT.GET answers, a stream a check
needs that the server refuses (make_stream), an ack that reaches no consumer, and push.queue-group and
queue-group-enforced; and those of the ttl, pause, apilevel, republish, metadata, compression, counters and
priority areas, whose checks were written with them.
"""

from __future__ import annotations

REASONS: dict[str, str | tuple[str, ...]] = {
    "apilevel.asset-metadata": "the server sets _nats.ver, _nats.level and _nats.req.level",
    "apilevel.info": "servers advertise their API level in $JS.API.INFO",
    "apilevel.required-header": "a request requiring API level",
    "apilevel.required-header-words": "will error with api level not supported",
    "apilevel.required-level": "requires API level 1",
    "compression.invalid-refused": "is documented as refused; the server accepted it",
    "compression.s2": "the compression asked is returned by create and info",
    "consumers.ack-all": "want, got await _info_reaches",
    "consumers.ack-explicit": "want, got await _info_reaches",
    "consumers.ack-none": "want, got await _info_reaches",
    "consumers.ack-policy-immutable": "nc, stream.name, name",
    "consumers.ack-wait-redelivery": "no redelivery within",
    "consumers.backoff": "ack_wait",
    "consumers.backoff-max-deliver": "DID NOT RAISE ApiError",
    "consumers.deliver-all": "nc, stream, consumer, 3",
    "consumers.deliver-by-start-sequence": "nc, stream, consumer, 2",
    "consumers.deliver-by-start-time": "start",
    "consumers.deliver-last": "deliver last must leave only the last message pending",
    "consumers.deliver-last-per-subject": "nc, stream, consumer, 2",
    "consumers.deliver-new": "earlier messages pending for deliver new",
    "consumers.durable": "config lost durable_name",
    "consumers.ephemeral": "s inactive_threshold",
    "consumers.filter-subject": "nc, stream.name, consumer",
    "consumers.filter-subjects": "nc, stream.name, consumer",
    "consumers.filter-validation": "DID NOT RAISE ApiError",
    "consumers.in-progress": "redelivered",
    "consumers.info-pending-counters": "io.nats.jetstream.ap",
    "consumers.info-redelivered": "both messages should be redelivered once",
    "consumers.max-ack-pending": "max_ack_pending 2 let through",
    "consumers.max-deliver": "with max_deliver 2",
    "consumers.nak": "no redelivery within",
    "consumers.nak-delay": "no redelivery within",
    "consumers.term": "terminated message redelivered",
    "counters.api-level": "a counter stream requires API level 2",
    "counters.big-values": "counters are big integers, exact beyond 2^64",
    "counters.config": "is documented as refused; the server accepted it",
    "counters.disabled-refused": "a Nats-Incr publish to a stream without counters is rejected",
    "counters.forbidden-headers": "must be rejected; acked",
    "counters.increment": "PubAck carries the subject's new total as val",
    "counters.invalid-refused": "an increment that fails to parse, or none, is rejected",
    "dedup.by-id-not-payload": "e and other_",
    "dedup.default-window": "DEFAULT_WINDOW_NS, got stream.config",
    "dedup.duplicate-acked": "repeated id not flagged duplicate",
    "dedup.window-bounds": "DID NOT RAISE ApiError",
    "dedup.window-expiry": "duplicate",
    "dedup.window-follows-max-age": "max_age, got stream.config",
    "heartbeat.client-not-terminal": "consumption",
    "heartbeat.client-reports-missed": "ADR-37: a warning once 2 x idle_heartbeat pass without",
    "heartbeat.not-while-flowing": "idle heartbeat",
    "heartbeat.pull-heartbeat-needs-expires": "pull request with heartbeat",
    "heartbeat.pull-heartbeat-too-large": "pull request with heartbeat",
    "heartbeat.pull-idle": "deliver",
    "heartbeat.push-idle": "e push consumer",
    "kv.bucket-allow-direct": "0 created the bucket with allow_direct",
    "kv.bucket-stream": "0 made a bucket stream that differs from ADR-8",
    "kv.create-client": "ADR-8: create stores a key again once it is deleted or purged",
    "kv.create-purge-aware": "create after the purge refused",
    "kv.create-wire": "stream",
    "kv.delete-marker": "0 delete marker: SubjectMessage",
    "kv.deny-delete": "DID NOT RAISE ApiError",
    "kv.direct-get": "answers the key's latest message",
    "kv.get-missing": "ADR-8: get of a missing key raises KeyNotFound",
    "kv.history-bounds": "0 and made a bucket with max_msgs_per_subject",
    "kv.purge-marker": "0 purge marker",
    "kv.put-get": "ADR-8: get returns the key's latest entry",
    "kv.status": "3, history",
    "kv.ttl-duplicate-window": "max_age, duplicate_window",
    "kv.update-client": "ADR-8: update with a stale revision is refused",
    "kv.update-wire": "stream",
    "kv.watch-eod-empty": "The signal must always be sent",
    "kv.watch-ignore-deletes": "ADR-8 IgnoreDeletes",
    "kv.watch-include-history": "ADR-8 IncludeHistory",
    "kv.watch-initial-then-updates": "the latest entr",
    "kv.watch-key-filter": "the range",
    "kv.watch-updates-only": "the end of initial data",
    "limits.discard-new-per-subject-needs-discard-new": "DID NOT RAISE ApiError",
    "limits.discard-new-per-subject-needs-per-subject-limit": "DID NOT RAISE ApiError",
    "limits.interest-stream": "state: StreamState",
    "limits.lowered-limit-applies": "state: StreamState",
    "limits.max-age": "messages",
    "limits.max-age-minimum": "DID NOT RAISE ApiError",
    "limits.max-bytes-discard-new": "DID NOT RAISE APIError",
    "limits.max-bytes-discard-old": "consumer_count",
    "limits.max-msg-size": "DID NOT RAISE APIError",
    "limits.max-msgs-discard-new": "DID NOT RAISE APIError",
    "limits.max-msgs-discard-old": "state: StreamState",
    "limits.max-msgs-per-subject-discard-old": "state.messages, state.first_seq, state.subjects",
    "limits.per-subject-replaces-at-max-msgs": "DID NOT RAISE APIError",
    "limits.workqueue-stream": "discard old state: StreamState",
    "metadata.round-trip": "metadata given at create comes back as given",
    "metadata.size-limit": "is documented as refused; the server accepted it",
    "model.limits-discard-deletes": "the rules give",
    "model.publish-purge": "the rules give",
    "objectstore.add-link-rules": "ADR-20: get of a link returns the linked object's bytes",
    "objectstore.bucket-stream": "0 created differs from ADR-20",
    "objectstore.chunking": "ADR-20: get returns the stored bytes",
    "objectstore.delete": "ADR-20: delete leaves the name one info message, marked deleted",
    "objectstore.delete-missing": "0 delete of a missing object raised no not-found error",
    "objectstore.digest-verified": "ADR-20: the digest is checked: get refuses bytes that do not match it",
    "objectstore.link-get": "ADR-20: get of a link returns the linked object's bytes",
    "objectstore.list": "When listing objects, filter those objects that have",
    "objectstore.mtime-not-stored": "Modified time is never stored",
    "objectstore.put-get": "ADR-20: get returns the stored bytes",
    "objectstore.replace": "ADR-20: after a put under a taken name, get returns the new bytes",
    "objectstore.update-meta": "update",
    "objectstore.watch": "ADR-20 Watch: e",
    "objectstore.watch-updates-only": "the client documents UpdatesOnly as",
    "objectstore.wire-layout": "0 stored differs from ADR-20",
    "ordered.consumer-deleted-recovered": "once each, in order; the client delivered",
    "ordered.filter-subject": "across a reset: expected stream sequences",
    "ordered.gap-recovered": "0: after stream sequence 5 was dropped in transit:",
    "ordered.heartbeat-stall-recovered": "once each, in order; the client delivered",
    "ordered.old-consumer-released": "0: after a delivery was dropped in transit: expected",
    "ordered.recreated-config": "0: after a delivery was dropped in transit: expected",
    "ordered.server-restart-recovered": "once each, in order; the client delivered",
    "ordered.start-policy": "once each, in order; the client delivered",
    "pause.create-config": "a consumer created with PauseUntil is paused until then",
    "pause.heartbeats-continue": "continue to receive heartbeat messages",
    "pause.no-deliveries": ("delivers nothing before its pause_until", "delivery resumes once the deadline has passed"),
    "pause.resume-empty": "If payload is nil the consumer will be resumed",
    "pause.until": ("the pause answers paused true", "consumer info of a paused consumer shows paused"),
    "priority.config-refusals": "is documented as refused; the server accepted it",
    "priority.one-group": "more than one priority group is documented as refused",
    "priority.overflow-min-pending": "min_pending",
    "priority.pin-id": ("a pull whose id does not match the pin gets a 423", "includes a Nats-Pin-Id header"),
    "priority.pull-needs-group": "pulls not part of a valid group result in an error",
    "priority.unpin": ("so a pull with the old id gets a 423", "includes a Nats-Pin-Id header"),
    "publish.expected-checks-before-dedup": "-first; it checked",
    "publish.expected-last-msg-id": ("DID NOT RAISE BadRequestError", "documented to be stored; the server refused it"),
    "publish.expected-last-sequence": "DID NOT RAISE BadRequestError",
    "publish.expected-last-subject-sequence": "DID NOT RAISE BadRequestError",
    "publish.expected-last-subject-sequence-subject": "the docs have the server enforce the sequence against",
    "publish.expected-stream": "DID NOT RAISE BadRequestError",
    "publish.puback-fields": "first publishes flagged duplicate",
    "pull.bad-request": "documented status",
    "pull.batch": "batch 3 delivered 2",
    "pull.consumer-deleted": "documented status",
    "pull.empty-body-one": "an empty request delivered 2 messages",
    "pull.expires-timeout": "documented status",
    "pull.max-bytes": "documented status",
    "pull.max-request-batch": "documented status 409 Exceeded MaxRequestBatch",
    "pull.max-request-expires": "documented status",
    "pull.max-request-max-bytes": "documented status 409 Exceeded MaxRequestMaxBytes",
    "pull.max-waiting": "documented status",
    "pull.no-wait-empty": "documented status",
    "pull.no-wait-partial": "as nats-server",
    "pull.push-based": "documented status",
    "purge.all": "expected reply",
    "purge.consumer-moves-forward": "pending after purge: 0, expected 3",
    "purge.filter": "purged, got reply",
    "purge.filter-keep": "purged, got reply",
    "purge.filter-seq": "expected reply",
    "purge.keep": "purged",
    "purge.keep-at-least-count": "expected reply",
    "purge.seq": "expected reply",
    "purge.seq-keep-rejected": "DID NOT RAISE ApiError",
    "purge.seq-one": "storage removed 6 of 6 messages on nats-server",
    "purge.unknown-stream": "DID NOT RAISE ApiError",
    "push.durable-config": "expected 3 messages, each once",
    "push.ephemeral": "consumer",
    "push.queue-group-enforced": "a push subscription must match its consumer's deliver_group",
    "reads.delete-denied": "DID NOT RAISE ApiError",
    "reads.delete-message": "DID NOT RAISE ApiError",
    "reads.direct-get": "headers",
    "reads.direct-get-batch-from-deleted-sequence": "with 1-3 purged and 5 deleted: documented the messages",
    "reads.direct-get-multi-last-up-to-time-before-first": "no message is stored up to a time before the first",
    "reads.direct-get-needs-allow-direct": "a stream without allow_direct answered DIRECT.GET:",
    "reads.direct-get-not-found": "status None, payload b",
    "reads.direct-get-start-time-after-last": "matches no message, documented answer 404; got messages",
    "reads.direct-get-subject-appended": "ADR-31: the last message on the subject",
    "reads.get-bad-request": "DID NOT RAISE ApiError",
    "reads.get-by-sequence": "stored headers not returned",
    "reads.get-last-by-subject": ("last message having the subject", "documented to answer a stored message"),
    "reads.get-missing": "DID NOT RAISE ApiError",
    "reads.get-next-by-subject": "expected _seq_and_payload",
    "republish.cycle-refused": "is documented as refused; the server accepted it",
    "republish.headers": (
        "is republished to the transformed dest",
        "each stored message that matches src is republished",
    ),
    "republish.headers-only": (
        "with headers_only the republished message has no body",
        "each stored message that matches src is republished",
    ),
    "retention.interest-dropped-without-interest": "state: StreamState",
    "retention.interest-max-deliver-stays": "ed message was delivered again",
    "retention.interest-removed-when-all-acked": "still stored after both consumers acked",
    "retention.interest-rollup": "a Nats-Rollup: all message no consumer is interested",
    "retention.workqueue-deliver-all": "DID NOT RAISE ApiError",
    "retention.workqueue-explicit-ack": "DID NOT RAISE ApiError",
    "retention.workqueue-max-deliver-stays": "DID NOT RAISE TimeoutError",
    "retention.workqueue-one-unfiltered": "DID NOT RAISE ApiError",
    "retention.workqueue-overlapping-filters": "DID NOT RAISE ApiError",
    "retention.workqueue-partially-overlapping-filters": "DID NOT RAISE ApiError",
    "retention.workqueue-pull-ack-none": "DID NOT RAISE ApiError",
    "retention.workqueue-removed-on-ack": "acknowledged WorkQueue message still stored",
    "streams.create-different-config-rejected": "is documented as refused; the server accepted it",
    "streams.create-idempotent": "documented to succeed; the server refused it",
    "streams.create-subject-overlap-rejected": "is documented as refused; the server accepted it",
    "streams.delete": "DID NOT RAISE ApiError",
    "streams.info": "expected summary",
    "streams.info-unknown-rejected": "DID NOT RAISE ApiError",
    "streams.list": "for e in filtered",
    "streams.names": "missing from STREAM.NAMES",
    "streams.names-by-subject": "STREAM.NAMES for",
    "streams.update-editable": "update reply has max_msgs",
    "streams.update-one-way-flags": "is documented as refused; the server accepted it",
    "streams.update-retention-limits-interest": "nc, stream, retention",
    "streams.update-retention-workqueue-rejected": "is documented as refused; the server accepted it",
    "streams.update-storage-rejected": "is documented as refused; the server accepted it",
    "streams.update-unknown-rejected": "DID NOT RAISE ApiError",
    "ttl.cannot-disable": "is documented as refused; the server accepted it",
    "ttl.clamped-to-marker-ttl": "the effective TTL is raised to the marker TTL",
    "ttl.disabled-refused": "a Nats-TTL publish to a stream with the feature disabled is rejected",
    "ttl.expires": ("was still stored", "is removed at its deadline"),
    "ttl.invalid-refused": "an unparsable or sub-second Nats-TTL is rejected with 10165",
    "ttl.marker-sets-rollup": "AllowRollup must be true",
    "ttl.marker-ttl-minimum": "is documented as refused; the server accepted it",
    "ttl.max-age-marker": "the server places a marker",
    "ttl.never": "a never message is not removed by the stream's MaxAge",
}
ROW_REASONS: dict[str, dict[str, str | tuple[str, ...]]] = {
    "acks-only+consumer-deliver-last": {
        "consumers.opt-start-conflict": "consumer delivery policy is deliver last, but optional",
    },
    "consumer-drop-start+consumer-drop-filters": {
        "consumers.last-per-subject-pending": "last messages of k.A, k.B, k.C, k.D pending: 215",
        "consumers.opt-start-conflict": "DID NOT RAISE ApiError",
    },
    "consumer-info-off-by-one+consumer-hide-durable+consumer-drop-inactive-threshold+consumer-drop-ack-wait": {
        "consumers.last-per-subject-pending": "are left",
    },
    "create-drop-discard-new-per-subject+create-drop-retention+consumer-drop-delivery-limits": {
        "limits.discard-new-per-subject": "DID NOT RAISE APIError",
        "retention.interest-follows-filters": "kept",
    },
    "create-drop-limits": {
        "limits.discard-new-per-subject": "is documented as valid; the server refused it",
    },
    "create-drop-window": {
        "dedup.window-not-extended": "s was still a duplicate",
    },
    "create-window-fifth": {
        "dedup.window-not-extended": "id forgotten after",
    },
    "kv-get-garbled+watch-hide-end": {
        "kv.history-kept": "no end-of-initial-data signal?",
        "kv.keys": "no end-of-initial-data signal?",
    },
    "kv-stream-config+obj-config+kv-purge-keep-one": {
        "kv.history-kept": "puts were revisions",
    },
    "kv-strip-operation+obj-strip-rollup+push-misroute-acks": {
        "kv.keys": "nats-py",
        "objectstore.replace": "info messages for the name after nats-py",
        "push.durable-resumes": "an ack reaches the consumer that delivered the message",
    },
    "msg-delete-hide-errors": {
        "reads.delete-missing": "DID NOT RAISE ApiError",
    },
    "msg-get-drop-subject-selectors+msg-get-first-by-default+msg-get-drop-headers+msg-delete-next-seq+direct-get-strip-headers+create-allow-direct": {  # noqa: E501
        "reads.delete-missing": "deleting missing seq 1",
        # the deletes it steps through go to the next sequence, which is not stored: the check cannot set its state up
        "reads.get-last-by-subject": ("last message having the subject", "is documented to remove it"),
    },
    "nats-py:chatty-missed-heartbeat": {
        "heartbeat.client-quiet-while-flowing": "ADR-37: a warning once 2 x idle_heartbeat pass without",
    },
    "nats-py:duplicate-delivery": {
        "heartbeat.client-quiet-while-flowing": "1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9,",
        "push.queue-group": "s queue members received",
    },
    "nats-py:kv-stream-config": {
        "kv.history-kept": "puts were revisions",
    },
    "nats-py:kv-stream-config,kv-get-garbled": {
        "kv.history-kept": "puts were revisions",
    },
    "nats-py:kv-strip-operation": {
        "kv.keys": "nats-py",
    },
    "nats-py:obj-config,obj-fabricate-missing": {
        "objectstore.add-link-rules": "ADR-20: AddLink links a name to a live object",
        "objectstore.rename": "obj_update_meta: exists:",
    },
    "nats-py:obj-keep-renamed": {
        "objectstore.rename": "ADR-20: a rename moves the object to the new name",
    },
    "nats-py:obj-stamp-mtime,obj-strip-deleted": {
        "objectstore.add-link-rules": "ADR-20: AddLink refuses a deleted object as its target",
        "objectstore.delete": "ADR-20: a deleted object is not found",
        "objectstore.link-get": "ADR-20: a link to a deleted object is not found",
    },
    "nats-py:obj-strip-digest": {
        "objectstore.rename": "ADR-20: a rename onto the name of a live object is refused",
    },
    "nats-py:obj-strip-rollup": {
        "objectstore.replace": "info messages for the name after nats-py",
    },
    "nats-py:strip-expected": {
        "kv.create-client": "ADR-8: create refuses a key with a value",
    },
    "nats.go:chatty-missed-heartbeat": {
        "heartbeat.client-quiet-while-flowing": "ADR-37: a warning once 2 x idle_heartbeat pass without",
    },
    "nats.go:duplicate-delivery": {
        "heartbeat.client-quiet-while-flowing": "1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9,",
        "push.queue-group": "s queue members received",
    },
    "nats.go:kv-stream-config": {
        "kv.history-kept": "puts were revisions",
    },
    "nats.go:kv-stream-config,kv-get-garbled": {
        "kv.history-kept": "puts were revisions",
    },
    "nats.go:kv-strip-operation": {
        "kv.keys": "nats.go",
    },
    "nats.go:obj-config,obj-fabricate-missing": {
        "objectstore.add-link-rules": "ADR-20: AddLink links a name to a live object",
        "objectstore.rename": "obj_update_meta: exists:",
    },
    "nats.go:obj-keep-renamed": {
        "objectstore.rename": "ADR-20: a rename moves the object to the new name",
    },
    "nats.go:obj-stamp-mtime,obj-strip-deleted": {
        "objectstore.add-link-rules": "ADR-20: AddLink refuses a deleted object as its target",
        "objectstore.delete": "ADR-20: a deleted object is not found",
        "objectstore.link-get": "ADR-20: a link to a deleted object is not found",
    },
    "nats.go:obj-strip-digest": {
        "objectstore.rename": "ADR-20: a rename onto the name of a live object is refused",
    },
    "nats.go:obj-strip-rollup": {
        "objectstore.replace": "info messages for the name after nats.go",
    },
    "nats.go:strip-expected": {
        "kv.create-client": "ADR-8: create refuses a key with a value",
    },
    "nats.js:chatty-missed-heartbeat": {
        "heartbeat.client-quiet-while-flowing": "ADR-37: a warning once 2 x idle_heartbeat pass without",
    },
    "nats.js:duplicate-delivery": {
        "heartbeat.client-quiet-while-flowing": "1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9,",
        "push.queue-group": "s queue members received",
    },
    "nats.js:kv-stream-config": {
        "kv.history-kept": "puts were revisions",
    },
    "nats.js:kv-stream-config,kv-get-garbled": {
        "kv.history-kept": "puts were revisions",
    },
    "nats.js:kv-strip-operation": {
        "kv.keys": "nats.js",
    },
    "nats.js:obj-config,obj-fabricate-missing": {
        "objectstore.add-link-rules": "ADR-20: AddLink links a name to a live object",
        "objectstore.rename": "obj_update_meta: exists: Error: an object already",
    },
    "nats.js:obj-keep-renamed": {
        "objectstore.rename": "ADR-20: a rename moves the object to the new name",
    },
    "nats.js:obj-stamp-mtime,obj-strip-deleted": {
        "objectstore.add-link-rules": "ADR-20: AddLink refuses a deleted object as its target",
        "objectstore.delete": "ADR-20: a deleted object is not found",
        "objectstore.link-get": "ADR-20: a link to a deleted object is not found",
    },
    "nats.js:obj-strip-digest": {
        "objectstore.rename": "ADR-20: a rename onto the name of a live object is refused",
    },
    "nats.js:obj-strip-rollup": {
        "objectstore.replace": "info messages for the name after nats.js",
    },
    "nats.js:strip-expected": {
        "kv.create-client": "ADR-8: create refuses a key with a value",
    },
    "obj-strip-digest+push-deliver-last+push-drop-deliver-group": {
        "push.durable-resumes": "expected 2 messages, got",
        "push.queue-group": "has the queue as its deliver_group",
    },
    "puback-mark-duplicate": {
        "dedup.window-not-extended": "s was still a duplicate",
    },
    "purge-keep-one": {
        "dedup.ids-survive-purge": "await stream_state",
    },
    "push-deliver-last+push-drop-deliver-group:nats.go": {
        "push.durable-resumes": "expected 2 messages, got",
        "push.queue-group": "has the queue as its deliver_group",
    },
    "push-deliver-last+push-drop-deliver-group:nats.js": {
        "push.durable-resumes": "expected 2 messages, got",
        "push.queue-group": "has the queue as its deliver_group",
    },
    "strip-expected+obj-fabricate-missing": {
        "kv.create-client": "ADR-8: create refuses a key with a value",
    },
    "strip-msg-id": {
        "dedup.ids-survive-purge": "the purge made the server forget the id",
        "dedup.window-not-extended": "id forgotten after",
    },
}
