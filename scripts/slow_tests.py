"""Write tests/slow_tests.txt: the tests that took at least `--over` seconds in a whole run's JUnit XML (for example
`PYTEST_ADDOPTS=--junitxml=run.xml .venv/bin/pytest`), beside the patterns `tests/conftest.py` names by reason, so
the fast tier (`pytest -m "not slow"`) stays quick as tests are added. Run it again when the tier grows slow."""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "slow_tests.txt"
HEADER = "# tests that took at least {over:g} s in a whole run (scripts/slow_tests.py); conftest.py marks them slow\n"


def node_id(classname: str, name: str) -> str:
    """`tests.clients.test_go_driver.TestGo` + `test_x[a]` -> `tests/clients/test_go_driver.py::TestGo::test_x[a]`."""
    parts = classname.split(".")
    module_end = next(i for i, part in enumerate(parts) if part.startswith("test_")) + 1
    return "::".join(["/".join(parts[:module_end]) + ".py", *parts[module_end:], name])


def slow_ids(junit: Path, over: float) -> list[str]:
    return sorted(
        {
            node_id(case.get("classname", ""), case.get("name", ""))
            for case in ET.parse(junit).iter("testcase")
            if float(case.get("time") or 0) >= over
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("junit", type=Path)
    parser.add_argument("--over", type=float, default=1.0, help="seconds (default 1)")
    args = parser.parse_args()
    OUT.write_text(HEADER.format(over=args.over) + "".join(f"{test}\n" for test in slow_ids(args.junit, args.over)))


if __name__ == "__main__":
    main()
