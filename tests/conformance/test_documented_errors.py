"""Refusals are compared as documents fix them: status and code from the errors table, words only where a document
fixes them (conformance/documented_errors.py), and no check compares a description outside it."""

from __future__ import annotations

import ast

import pytest

from jetcheck.conformance.check_results import DISAGREE_PREFIX
from jetcheck.conformance.documented_errors import (
    ERRORS_TABLE,
    TABLE,
    DocumentedRefusal,
    Refusal,
    assert_refused_as_a_document_says,
    assert_refused_as_documented,
    refusal_in,
)
from tests.source_tree import ROOT

CHECKS = ROOT / "conformance" / "checks"
CODE_RANGE = range(10000, 11000)


def _is_code(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, int) and node.value in CODE_RANGE


def _is_words(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.Attribute):
        return node.attr == "description"
    return isinstance(node, ast.JoinedStr | ast.Name)


def _is_refusal_display(node: ast.AST) -> bool:
    """(status, code, words), or (*STATUS_AND_CODE, words)."""
    return (
        isinstance(node, ast.Tuple)
        and any(_is_code(e) or isinstance(e, ast.Starred) for e in node.elts)
        and any(_is_words(e) for e in node.elts)
    )


def _is_description(node: ast.AST) -> bool:
    """An API error's description: `x.description` (but a pull status's, ADR-13's words in headers) or
    `x.get("description")`."""
    if isinstance(node, ast.Attribute):
        return node.attr == "description" and not ast.unparse(node.value).endswith("status")
    return (
        isinstance(node, ast.Call)
        and ast.unparse(node.func).endswith(".get")
        and any(isinstance(a, ast.Constant) and a.value == "description" for a in node.args)
    )


def _compares_words(node: ast.Compare, refusal_names: set[str]) -> bool:
    """A comparison with a refusal display (or a name bound to one), or with an error's description."""
    for side in (node.left, *node.comparators):
        if _is_refusal_display(side) or (isinstance(side, ast.Name) and side.id in refusal_names):
            return True
        if _is_description(side) or (isinstance(side, ast.Tuple) and any(map(_is_description, side.elts))):
            return True
    return False


def words_compared_by_hand(source: str) -> list[int]:
    """Lines of `source` that compare an API error's words outside documented_errors."""
    tree = ast.parse(source)
    refusal_names = {
        target.id
        for node in tree.body
        if isinstance(node, ast.Assign) and _is_refusal_display(node.value)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    return sorted(
        node.lineno for node in ast.walk(tree) if isinstance(node, ast.Compare) and _compares_words(node, refusal_names)
    )


def test_no_check_compares_an_error_description_by_hand():
    """Every check compares a refusal through DocumentedRefusal: words only where a document fixes them."""
    found = {
        path.name: lines for path in sorted(CHECKS.glob("*.py")) if (lines := words_compared_by_hand(path.read_text()))
    }
    assert not found, f"compare refusals through conformance.documented_errors.DocumentedRefusal: {found}"


@pytest.mark.parametrize(
    "source",
    [
        'assert rejection == (400, 10058, "stream name already in use")',
        'assert rejection == (*INVALID_CONFIG, "stream configuration update can not change storage type")',
        'assert rejected.value.description == "max deliver is required"',
        'assert refused.get("description") == "api level not supported"',
        'NOT_FOUND = (404, 10059, "stream not found")\nassert _rejection(error) == NOT_FOUND',
        "assert (error.code, error.err_code, error.description) == rejection",
    ],
    ids=["tuple", "starred", "attribute", "get", "constant", "attributes-in-a-tuple"],
)
def test_the_source_reader_finds_each_form_of_hand_comparison(source):
    """The reader finds a hand comparison in each form the checks used before documented_errors."""
    assert words_compared_by_hand(source) == [source.count("\n") + 1]


def test_a_pull_status_description_is_not_an_api_error():
    assert words_compared_by_hand('assert reply.status.description == "No Messages"') == []


def test_words_the_table_does_not_fix_are_not_compared():
    """10052's description is `{err}` in the errors table: any words pass, the code must match."""
    documented = DocumentedRefusal(500, 10052)
    assert documented.expected_words is None
    assert documented.deviation(Refusal(500, 10052, "whatever nats-server says")) is None
    assert documented.deviation(Refusal(400, 10052, "x")) == "refused with 400/10052"


def test_words_the_table_fixes_are_compared():
    assert (
        DocumentedRefusal(404, 10059).deviation(Refusal(404, 10059, "stream gone"))
        == "refused with the words 'stream gone'"
    )
    filled = DocumentedRefusal(400, 10071, "wrong last sequence: 2")
    assert filled.deviation(Refusal(400, 10071, "wrong last sequence: 2")) is None
    assert filled.deviation(Refusal(400, 10071, "wrong last sequence: 3")) is not None


@pytest.mark.parametrize(
    ("status", "code", "words"),
    [(500, 10052, "message TTL status can not be disabled"), (400, 10071, "wrong sequence"), (500, 10059, None)],
    ids=["undocumented-words", "words-outside-the-template", "wrong-status"],
)
def test_an_expectation_the_documents_do_not_back_is_refused(status, code, words):
    with pytest.raises(ValueError, match="errors"):
        DocumentedRefusal(status, code, words)


def test_words_from_another_document_are_compared_and_named():
    ttl = DocumentedRefusal(500, 10052, "message TTL status can not be disabled", words_from="ADR-43")
    assert ttl.deviation(Refusal(500, 10052, "another reason")) is not None
    with pytest.raises(AssertionError, match="ADR-43"):
        assert_refused_as_documented(Refusal(500, 10052, "another reason"), ttl, "turning TTLs off")


def test_the_table_is_the_errors_pages():
    """Spot values of docs.nats.io's errors table, so a transcription slip shows (the page is ERRORS_TABLE)."""
    assert ERRORS_TABLE == "docs.nats.io/reference/jetstream/errors"
    assert TABLE[10059] == (404, "stream not found")
    assert TABLE[10052] == (500, "{err}")
    assert TABLE[10077] == (503, "{err}")


ADR_WORDS = DocumentedRefusal(412, 10185, "api level not supported", words_from="ADR-44")
TABLE_WORDS = DocumentedRefusal(412, 10185)


@pytest.mark.parametrize(
    ("got", "followed", "departed"),
    [
        (Refusal(412, 10185, "JetStream minimum api level required"), TABLE_WORDS, ADR_WORDS),
        (Refusal(412, 10185, "api level not supported"), ADR_WORDS, TABLE_WORDS),
    ],
    ids=["follows-the-table", "follows-the-adr"],
)
def test_a_refusal_as_one_of_two_disagreeing_documents_says_ends_as_disagree_naming_both(got, followed, departed):
    """Whichever document the target follows, the check ends as `disagree`, with both documents and their words."""
    with pytest.raises(pytest.skip.Exception) as ended:
        assert_refused_as_a_document_says(got, (ADR_WORDS, TABLE_WORDS), "a request requiring level 9")
    message = ended.value.msg
    assert message.startswith(DISAGREE_PREFIX)
    assert f"the target follows {followed}, not {departed}" in message
    assert "ADR-44" in message and ERRORS_TABLE in message and str(got) in message


@pytest.mark.parametrize(
    "got",
    [Refusal(412, 10185, "other words"), Refusal(400, 10185, "api level not supported"), Refusal(0, 0, "")],
    ids=["other-words", "other-status", "no-refusal"],
)
def test_a_refusal_neither_document_gives_fails(got):
    with pytest.raises(AssertionError, match="or as another document says"):
        assert_refused_as_a_document_says(got, (ADR_WORDS, TABLE_WORDS), "a request requiring level 9")


def test_documents_that_give_one_refusal_do_not_disagree():
    with pytest.raises(ValueError, match="do not disagree"):
        assert_refused_as_a_document_says(Refusal(404, 10059, "x"), (DocumentedRefusal(404, 10059),) * 2, "a get")


def test_a_reply_carries_its_refusal_or_none():
    assert refusal_in({"error": {"code": 400, "err_code": 10171, "description": "d"}}) == Refusal(400, 10171, "d")
    assert refusal_in({"seq": 3}) is None
