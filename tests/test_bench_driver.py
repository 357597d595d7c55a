"""The benchmark driver (bench/run.py): the records hold their declared figures, the pages are
generated from them, and a rerun whose figures moved is not kept."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def _driver():
    spec = importlib.util.spec_from_file_location("bench_run", REPO / "bench" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_run"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


run = _driver()
# A condition whose command records {"share": <argv value>} through bench/results.py.
RECORDING = (
    "python -c \"import sys; sys.path.insert(0, 'bench'); import results; "
    "results.record(sys.argv[-1], {'share': float(sys.argv[1])})\" {index}"
)


def _driver_says(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, str(REPO / "bench" / "run.py"), *args]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_every_record_says_how_it_was_made() -> None:
    for path in (REPO / "bench" / "results").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        assert {"command", "commit", "date", "machine", "figures"} <= record.keys(), path.name


def test_every_record_is_declared_and_holds_its_conditions_figures() -> None:
    result = _driver_says("check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_benchmarks_page_and_the_readme_tables_match_the_records() -> None:
    result = _driver_says("page", "--check")
    assert result.returncode == 0, result.stderr


def test_a_figure_outside_its_tolerance_or_missing_is_named() -> None:
    condition = run.Condition(
        name="x", area="Verdict", about="", command="",
        figures=(
            run.Figure(row="a", key="set.share", expect=0.5, tolerance=0.01),
            run.Figure(row="b", key="set.missing"),
        ),
    )  # fmt: skip
    found = run.problems(condition, {"figures": {"set": {"share": 0.52}}})
    assert found == [
        "x: set.share = 0.52, expected 0.5 ± 0.01",
        "x: no 'set.missing' in the record",
    ]
    assert run.problems(condition, {"figures": {"set": {"share": 0.505, "missing": 1}}}) == []


@pytest.mark.parametrize(("measured", "kept"), [("0.5", True), ("0.7", False)])
def test_a_rerun_is_kept_only_when_its_figures_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured: str, kept: bool
) -> None:
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    condition = run.Condition(
        name="probe", area="Verdict", about="", command=RECORDING,
        figures=(run.Figure(row="share", key="share", expect=0.5, tolerance=0.01),),
    )  # fmt: skip
    status = run.run(condition, {"index": measured, "wiki": None, "pairs": None}, keep=True)
    assert status == (0 if kept else 1)
    assert (tmp_path / "probe.json").is_file() is kept
    if kept:  # its command as declared: placeholders, not this machine's paths
        record = json.loads((tmp_path / "probe.json").read_text(encoding="utf-8"))
        assert record["command"] == f"{RECORDING} --record probe"


def test_a_placeholder_the_rerun_was_not_given_is_one_line(tmp_path: Path) -> None:
    condition = run.Condition(name="p", area="Verdict", about="", command="python x.py {pairs}")
    with pytest.raises(SystemExit, match=r"p needs --pairs \(a `train verdict` run's"):
        condition.argv({"index": "i", "wiki": None, "pairs": None})
    assert condition.argv({"index": "i", "pairs": "w/pairs.jsonl.gz"})[1:] == [
        "x.py", "w/pairs.jsonl.gz", "--record", "p",
    ]  # fmt: skip


def test_a_readme_block_is_regenerated_from_its_record() -> None:
    conditions, _ = run.load()
    stale = "before\n<!-- bench:retrieval-300 -->\n| stale | figures |\n<!-- /bench -->\nafter\n"
    fresh = run.readme(stale, conditions)
    record = json.loads((REPO / "bench" / "results" / "retrieval-300.json").read_text())
    recall = record["figures"]["feverous_s"]["pipeline_complete_recall@5"]
    assert fresh.startswith("before\n<!-- bench:retrieval-300 -->\n| |")
    assert f"| FEVEROUS-S complete recall@5 | {recall:.3f} |" in fresh
    assert "stale" not in fresh and fresh.endswith("<!-- /bench -->\nafter\n")
