"""JetStream API refusals as documents fix them: the status and code of every refusal a check expects, and its words
only where a document fixes them.

docs.nats.io's JetStream errors table (ERRORS_TABLE) gives each code its HTTP status and description. Many
descriptions are a placeholder only (10052's is `{err}`): for those the table fixes the code, and the words are
nats-server's own, which it may change in any release (ADR-7 keeps descriptions out of SemVer). A check compares
such words only where another document quotes them (ADR-43 lists its 10052 texts), naming that document. Where two
documents give a refusal differently (ADR-44's words and the table's for 10185), a target answering as one of them
ends the check as `disagree`, naming both (assert_refused_as_a_document_says).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from .check_results import documents_disagree

ERRORS_TABLE = "docs.nats.io/reference/jetstream/errors"

# err_code: (HTTP status, description) as ERRORS_TABLE gives them, `{...}` where the server fills a value in. Only the
# codes whose refusals the checks compare are here; tests/conformance/test_documented_errors.py holds the checks to it.
TABLE: dict[int, tuple[int, str]] = {
    10003: (400, "bad request"),
    10012: (500, "{err}"),
    10037: (404, "no message found"),
    10043: (400, "sequence {seq} not found"),
    10052: (500, "{err}"),
    10054: (400, "message size exceeds maximum allowed"),
    10057: (500, "{err}"),
    10058: (400, "stream name already in use with a different configuration"),
    10059: (404, "stream not found"),
    10065: (400, "subjects overlap with an existing stream"),
    10071: (400, "wrong last sequence: {seq}"),
    10077: (503, "{err}"),
    10094: (400, "{err}"),
    10098: (400, "workqueue stream requires explicit ack"),
    10099: (400, "multiple non-filtered consumers not allowed on workqueue stream"),
    10100: (400, "filtered consumer not unique on workqueue stream"),
    10101: (400, "consumer must be deliver all on workqueue stream"),
    10116: (400, "max deliver is required to be > length of backoff values"),
    10136: (400, "consumer cannot have both FilterSubject and FilterSubjects specified"),
    10138: (400, "consumer subject filters cannot overlap"),
    10139: (400, "consumer filter in FilterSubjects cannot be empty"),
    10159: (400, "Setting PriorityPolicy requires at least one PriorityGroup to be set"),
    10162: (400, "Valid priority group name must match A-Z, a-z, 0-9, -_/=)+ and may not exceed 16 characters"),
    10166: (400, "per-message TTL is disabled"),
    10169: (400, "message counter increment is missing"),
    10171: (400, "message counter increment is invalid"),
    10178: (400, "priority groups can not be used with push consumers"),
    10185: (412, "JetStream minimum api level required"),
    10189: (400, "message schedules pattern is invalid"),
    10190: (400, "message schedules target is invalid"),
}
PLACEHOLDER = re.compile(r"\{[a-z]+\}")


class Refusal(NamedTuple):
    """An API error as the server answered it."""

    code: int
    err_code: int
    description: str

    def __str__(self) -> str:
        return f"{self.code}/{self.err_code} '{self.description}'"


def refusal_of(error) -> Refusal:
    """The Refusal an ApiError (or a nats-py APIError) carries."""
    return Refusal(error.code or 0, error.err_code or 0, error.description or "")


def refusal_in(reply: dict) -> Refusal | None:
    """The Refusal a JSON reply (a publish's ack, an API answer) carries as its `error`; None when it has none."""
    error = reply.get("error")
    if not error:
        return None
    return Refusal(error.get("code") or 0, error.get("err_code") or 0, error.get("description") or "")


def _fits(words: str, template: str) -> bool:
    pattern = "".join(".+" if PLACEHOLDER.fullmatch(part) else re.escape(part) for part in _parts(template))
    return re.fullmatch(pattern, words) is not None


def _parts(template: str) -> list[str]:
    return [part for part in re.split(r"(\{[a-z]+\})", template) if part]


@dataclass(frozen=True)
class DocumentedRefusal:
    """A refusal as documented: ERRORS_TABLE's status and code, and words where a document fixes them: `words`
    (the description with its values filled in) must fit the table's description, or come from `words_from` (a
    document quoting them, such as an ADR). A description that is only a placeholder is never compared otherwise."""

    status: int
    err_code: int
    words: str | None = None
    words_from: str | None = None

    def __post_init__(self) -> None:
        if self.err_code not in TABLE:
            raise ValueError(f"{self.err_code} is not in the errors table this suite holds ({ERRORS_TABLE})")
        status, template = TABLE[self.err_code]
        if status != self.status:
            raise ValueError(f"{ERRORS_TABLE} gives {self.err_code} status {status}, not {self.status}")
        if self.words is not None and self.words_from is None and not self._fixed_by_table(self.words, template):
            raise ValueError(
                f"{ERRORS_TABLE} gives {self.err_code} the words '{template}', which do not fix '{self.words}': "
                "name the document that does (words_from)"
            )

    @staticmethod
    def _fixed_by_table(words: str, template: str) -> bool:
        return not PLACEHOLDER.fullmatch(template) and _fits(words, template)

    @property
    def expected_words(self) -> str | None:
        """The words the refusal must carry, or None where no document fixes them."""
        if self.words is not None:
            return self.words
        template = TABLE[self.err_code][1]
        return None if PLACEHOLDER.search(template) else template

    def deviation(self, got: Refusal) -> str | None:
        """How `got` differs from this refusal, or None when it is this refusal."""
        if (got.code, got.err_code) != (self.status, self.err_code):
            return f"refused with {got.code}/{got.err_code}"
        if self.expected_words is not None and got.description != self.expected_words:
            return f"refused with the words '{got.description}'"
        return None

    def __str__(self) -> str:
        source = self.words_from or ERRORS_TABLE
        if self.expected_words is None:
            return f"{self.status}/{self.err_code} ({source}; its words are not documented)"
        return f"{self.status}/{self.err_code} '{self.expected_words}' ({source})"


def assert_refused_as_documented(got: Refusal, documented: DocumentedRefusal, asked: str, observe=None) -> None:
    """Fails the check unless `got`, the answer to `asked`, is the documented refusal; where no document fixes its
    words, `observe` (the check's fixture) records the server's own."""
    if observe is not None and documented.expected_words is None:
        observe("description", got.description)
    deviation = documented.deviation(got)
    assert deviation is None, f"{asked} is refused with {documented}; {deviation}: {got}"


def assert_refused_as_a_document_says(
    got: Refusal, documents: tuple[DocumentedRefusal, DocumentedRefusal], asked: str
) -> None:
    """For a refusal two documents give differently: where `got`, the answer to `asked`, is the refusal one of
    `documents` gives, the check ends as `disagree`, naming both (check_results.documents_disagree); where it is
    neither's, the check fails."""
    first, second = documents
    same_code = (first.status, first.err_code) == (second.status, second.err_code)
    if same_code and (
        None in (first.expected_words, second.expected_words) or first.expected_words == second.expected_words
    ):
        raise ValueError(f"{first} and {second} do not disagree: one refusal is both")
    for followed, departed in ((first, second), (second, first)):
        if followed.deviation(got) is None:
            documents_disagree(str(followed), str(departed), f"{asked} was refused with {got}")
    raise AssertionError(
        f"{asked} is refused with {first}, or as another document says, {second}; it was refused with {got}"
    )
