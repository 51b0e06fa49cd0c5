"""A failed check's message in plain words: an assertion's own message, or for a bare assert what was expected and
the values seen; pytest's introspection stays in the raw detail (`describe`)."""

from __future__ import annotations

import ast
import re

import pytest


def describe(excinfo: pytest.ExceptionInfo | None, limit: int = 4000) -> str:
    if excinfo is None:
        return ""
    text = excinfo.exconly().strip()
    if isinstance(excinfo.value, BaseExceptionGroup):  # e.g. Hypothesis' FlakyFailure: show what it groups
        inner = "\n".join(f"  - {type(e).__name__}: {e}" for e in excinfo.value.exceptions)
        text = f"{text}\n{inner}"
    return _limit(text, limit)


def _limit(text: str, limit: int = 4000) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "\n... (truncated)"


# Object addresses in reprs (`<X object at 0x7f...>`) differ on every run and mean nothing to a reader.
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def plain(excinfo: pytest.ExceptionInfo | None) -> str:
    """What a failure means in plain words: an assertion's own message, or for a bare assert what was expected and
    the values seen; pytest's introspection (`where` lines, diffs, "Use -v") stays in the raw detail."""
    if excinfo is None:
        return ""
    if excinfo.errisinstance(pytest.fail.Exception):  # pytest.fail("...") in a check: its words, without "Failed: "
        return _ADDRESS.sub("", excinfo.value.msg)
    if not excinfo.errisinstance(AssertionError):
        return _ADDRESS.sub("", describe(excinfo))
    said, values = _split_assertion(str(excinfo.value))
    text = said or _expected_and_got(_statement(excinfo), values)
    notes = getattr(excinfo.value, "__notes__", [])  # Hypothesis' falsifying example
    return _ADDRESS.sub("", _limit("\n".join([text, *notes]).strip()))


def _statement(excinfo: pytest.ExceptionInfo) -> str:
    """The source of the statement that raised, or "" when its source is not available."""
    try:
        return str(excinfo.traceback[-1].statement).strip()
    except (AssertionError, IndexError):  # pytest asserts that the frame has source
        return ""


def _split_assertion(text: str) -> tuple[str, str]:
    """A rewritten assertion's text is `<message>\\nassert <values>\\n  <introspection>`: (message, values)."""
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.startswith("assert ")]
    if not starts:  # not rewritten by pytest: the text is the message
        return text.strip(), ""
    said = lines[: starts[-1]]
    said = said[:1] + [line.removeprefix("  ") for line in said[1:]]  # pytest indents a message's further lines
    return "\n".join(said).strip(), lines[starts[-1]].removeprefix("assert ")


def _expected_and_got(statement: str, values: str) -> str:
    """`expected <the asserted expression>, got <its values>` for an assert without a message."""
    try:
        test = ast.parse(statement).body[0].test  # type: ignore[attr-defined]
    except (SyntaxError, IndexError, AttributeError):
        expected = statement.removeprefix("assert ") or "the assertion to hold"
        return f"expected {expected}, got {values}" if values else f"expected {expected}"
    expected = ast.unparse(test)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op = _COMPARE_OPS.get(type(test.ops[0]))
        sides = values.split(f" {op} ") if op else []
        if len(sides) == 2:  # the values split unambiguously into left and right
            left, right = ast.unparse(test.left), test.comparators[0]
            got = [f"{left} = {sides[0]}"]
            if not _is_literal(right):
                got.append(f"{ast.unparse(right)} = {sides[1]}")
            return f"expected {expected}, got {', '.join(got)}"
    return f"expected {expected}, got {values}" if values else f"expected {expected}"


_COMPARE_OPS = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
}


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True
