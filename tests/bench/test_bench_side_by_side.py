"""The warm side-by-side condition runs an earlier commit as it was: its own code, its own
process, the same claims as this checkout."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from bench import side_by_side
from bench.context import Context
from bench.errors import BenchError

REPO = Path(__file__).resolve().parents[2]


def _worktrees() -> str:
    return subprocess.run(["git", "worktree", "list"], cwd=REPO, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip


@pytest.mark.parametrize("over", ["api", "http"])
def test_an_earlier_commit_is_timed_from_its_own_checkout_beside_this_one(
    over: str, sample_index: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through the Python API and through `feverous-es serve`: each version its own process."""
    before = _worktrees()
    started: list[Path] = []
    worker = side_by_side.WORKERS[over]

    def recorded(checkout: Path, index: Path):  # what each worker's code was
        started.append(checkout)
        return worker(checkout, index)

    monkeypatch.setitem(side_by_side.WORKERS, over, recorded)
    # the sample's claims stand in for the dev files (a clean checkout may have no ../shared)
    claims = [
        {"claim": c}
        for c in (
            "Henri Schoeman won bronze at Rio in 2016.",
            "Bill Persky was born in 1931.",
            "Paris is in France.",
        )
    ]
    monkeypatch.setattr(side_by_side, "dev_claims", lambda n, seed: {"sample": claims[: 3 * n]})
    figures = side_by_side.warm_side_by_side(
        Context("warm-side-by-side", index=sample_index),
        commits=["HEAD"],
        per_file=1,
        over=over,
    )
    this, earlier = started
    assert this == REPO and earlier != REPO and earlier.name == "checkout"
    assert figures["claims"] == 3 and figures["over"] == over  # each claim sent to both
    assert set(figures["versions"]) == {side_by_side.THIS, "HEAD"}
    ratio = figures["ratio_to_this"]["HEAD"]
    assert ratio["low"] <= ratio["median"] <= ratio["high"]
    assert _worktrees() == before  # the earlier checkout is gone again


def test_a_commit_git_does_not_know_is_one_clear_error() -> None:
    with (
        pytest.raises(BenchError, match="no worktree of not-a-commit"),
        side_by_side.checkout_at("not-a-commit"),
    ):
        pass


def test_the_ratio_is_the_earlier_versions_time_over_this_ones() -> None:
    ratio = side_by_side.median_ratio([1.0, 2.0, 4.0], [2.0, 4.0, 8.0])
    assert ratio == {"median": 2.0, "low": 2.0, "high": 2.0}
