"""The documentation's generated pages (the option and rule references) are the ones scripts/gen_docs.py writes
today: adding an option or a rule without regenerating its page fails here."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GENERATED = ("reference/options.md", "reference/rules")  # under docs/: what scripts/gen_docs.py writes
REGENERATE = ".venv/bin/python scripts/gen_docs.py"


def _pages(folder: Path) -> dict[str, str]:
    found = {}
    for name in GENERATED:
        path = folder / name
        files = sorted(path.rglob("*.md")) if path.is_dir() else [path] if path.exists() else []
        found |= {str(file.relative_to(folder)): file.read_text() for file in files}
    return found


def test_the_committed_reference_pages_are_the_generated_ones(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh, committed = _pages(tmp_path), _pages(ROOT / "docs")
    stale = sorted(name for name in fresh.keys() | committed.keys() if fresh.get(name) != committed.get(name))
    assert not stale, f"docs/ pages out of date: {', '.join(stale)}; run `{REGENERATE}` and commit them"
