"""docs/benchmarks.md is generated from the recorded runs, never edited by hand."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO


def test_every_record_says_how_it_was_made() -> None:
    for path in (REPO / "bench" / "results").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        assert {"command", "commit", "date", "machine", "figures"} <= record.keys(), path.name


def test_the_benchmarks_page_matches_the_records() -> None:
    check = [sys.executable, str(REPO / "bench" / "benchmarks_doc.py"), "--check"]
    result = subprocess.run(check, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
