"""Where jetcheck still reaches past the public API of pyspark, Locust and argparse, and why: the one list of them.

Everything else goes through their public API (Locust's events, `StatsEntry.extend`, `Runner.send_message`;
pyspark's `SparkSession.builder`, `SparkContext(gateway=...)`, `launch_gateway`; argparse's `add_argument` and
`parse_args`). The test below fails when a use is added that is not listed here, or a listed one is gone.

pyspark, reports/spark.py (`_forget_the_jvm`), after jetcheck stopped a JVM pyspark was starting (an interrupt, a
warm-up closed): pyspark keeps the gateway to its JVM in class attributes for the process's life, and a later
session would call into the JVM that is gone. `SparkSession.stop()` and `SparkContext.stop()` would reset some of
them, but both first call that JVM; nothing public drops the gateway.
- `SparkContext._gateway`, `SparkContext._jvm`: the gateway and its JVM view, set once per process.
- `SparkContext._active_spark_context`: the context `getOrCreate` would hand out again.
- `SparkSession._instantiatedSession`, `SparkSession._activeSession`: the session the builder would hand out again.

Locust, load/locustfile.py:
- `runner.stop = stop` (`stop_load_before_runner`): the drivers must stop before Locust's `Runner.stop` begins,
  whose first act, `inspect.stack()` for a debug line, holds the GIL for 150-300 ms on a busy machine; its first
  event, `test_stopping`, fires only after that. Every way to stop (the run time, the web UI, the master's stop
  message) calls that method, and Locust has no hook before it.
- `StatsError.occurrences += extra` (`count_every_op`): the requests of a report are merged with the public
  `StatsEntry.extend`, but Locust has no call that counts several occurrences of an error at once (its master adds a
  worker's errors the same way); `log_error` per operation would cost the load process a call per failed operation.

argparse:
- `self._negative_number_matcher` (jetcheck/cli.py `Parser`): argparse takes `-5s` or `-1e3` for an option, not
  a value; there is no public setting for which arguments look like negative numbers. Joining `--flag -5s` into
  `--flag=-5s` before parsing would do for options, but not for what certify passes on to pytest without `--`.
- `argparse._SubParsersAction` in the annotation of `add_command`:
  argparse has no public name for what `add_subparsers()` returns (annotations only, never evaluated).
- `parser._actions` in tests/test_options.py and tests/test_bad_input_fuzz.py: argparse has no public listing of a
  parser's arguments, which these tests hold against the option table.
"""

from __future__ import annotations

import re

from .source_tree import PRODUCT, ROOT

PRIVATE_USES = {
    "pyspark": re.compile(r"\b(?:SparkContext|SparkSession|SQLContext)\._\w+|\.(?:_jsc|_jvm|_jdf|_jsparkSession)\b"),
    "Locust": re.compile(
        r"\b(?:runner|environment|stats|entry)\._\w+|\brunner\.stop\s*="
        r"|\.(?:num_requests|num_failures|total_response_time|response_times|num_reqs_per_sec|num_fail_per_sec"
        r"|occurrences)\s*\+?="
    ),
    "argparse": re.compile(r"\bargparse\._\w+|\._actions\b|\._negative_number_matcher\b"),
}
LISTED = {
    ("reports/spark.py", "SparkContext._gateway"),
    ("reports/spark.py", "SparkContext._jvm"),
    ("reports/spark.py", "SparkContext._active_spark_context"),
    ("reports/spark.py", "SparkSession._instantiatedSession"),
    ("reports/spark.py", "SparkSession._activeSession"),
    ("load/locustfile.py", "runner.stop ="),
    ("load/locustfile.py", ".occurrences +="),
    ("jetcheck/cli.py", "._negative_number_matcher"),
    ("jetcheck/option_parsers.py", "argparse._SubParsersAction"),
    ("tests/test_options.py", "._actions"),
    ("tests/test_options.py", "argparse._SubParsersAction"),
    ("tests/test_bad_input_fuzz.py", "._actions"),
    ("tests/test_bad_input_fuzz.py", "argparse._SubParsersAction"),
}


def private_uses() -> set[tuple[str, str]]:
    """(file, what) for every private use of the three libraries in the product's modules and the tests."""
    found = set()
    for folder in (*PRODUCT, "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path == ROOT / "tests" / "test_private_apis.py":
                continue
            text = path.read_text(encoding="utf-8")
            for pattern in PRIVATE_USES.values():
                for match in pattern.finditer(text):
                    found.add((path.relative_to(ROOT).as_posix(), re.sub(r"\s+", " ", match[0])))
    return found


def test_every_private_use_of_pyspark_locust_and_argparse_is_listed_with_its_reason():
    """The module's docstring lists each use beyond the libraries' public API and why no public one does; a new
    use fails here until it is listed (or replaced), and a listed one that is gone fails until it is struck."""
    found = private_uses()
    assert found - LISTED == set(), "not listed (and explained) in this module"
    assert LISTED - found == set(), "listed, but no longer used"
