"""The reader's lean corrected: the verdict recalibrates the reader's SUPPORTS share where the
reader decides (``reader_scale``; a shift, ``reader_shift``, in the bench's variant), and
bench/calibration.py chooses them on held-out claims, shipping the decision's shift only where
it clears zero out of fold."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from bench.calibration import AS_READ, CUTS, as_read, cut_name, cut_table, lean, recalibrated
from bench.verdict_variants import SHIFTED
from feverous_es import Pipeline
from feverous_es.plugins.config import load_config
from feverous_es.plugins.interfaces import Label

TRUE = "Gold medalist Henri Schoeman won bronze at Rio in 2016."


def test_the_shift_moves_the_decision_and_the_scale_only_the_probability(
    sample_index: Path,
) -> None:
    said = {}
    for name, options in {
        "as read": AS_READ,
        "scaled": {"reader_scale": 0.5, "reader_shift": 0.0},
        "shifted": {"reader_scale": 1.0, "reader_shift": -20.0},
    }.items():
        config = load_config(None).with_plugins(verdict=SHIFTED)  # the bench's variant
        config = config.with_stage_options("verdict", **options)
        with Pipeline.open(sample_index, config=config) as pipeline:
            said[name] = pipeline.verify(TRUE).verdict
    read, scaled, shifted = said["as read"], said["scaled"], said["shifted"]
    assert read.label is scaled.label is Label.SUPPORTS
    assert 0.5 < scaled.probability < read.probability  # less sure, the same answer
    assert shifted.label is Label.REFUTES  # SUPPORTS now needs a share no reading has
    for verdict in (scaled, shifted):  # what the reader gave SUPPORTS and REFUTES is kept
        both = verdict.probabilities[Label.SUPPORTS] + verdict.probabilities[Label.REFUTES]
        as_read = read.probabilities[Label.SUPPORTS] + read.probabilities[Label.REFUTES]
        assert abs(both - as_read) < 1e-5


def _readings(rng: np.random.Generator, n: int, lean: float) -> tuple[list[dict], list[str]]:
    """``n`` sentence-routed claims, half true; the reader's SUPPORTS share leans by ``lean``."""
    gold = ["SUPPORTS" if i % 2 else "REFUTES" for i in range(n)]
    z = np.array([2.0 if g == "SUPPORTS" else -2.0 for g in gold]) + rng.normal(0, 2.5, n) + lean
    read = [{"route": "sentence", "supports": float(1 / (1 + np.exp(-v)))} for v in z]
    return read, gold


def test_a_leaning_reader_has_its_shift_chosen_and_a_fair_one_only_its_scale() -> None:
    rng = np.random.default_rng(0)
    read, gold = _readings(rng, 4000, lean=3.0)  # leans far to SUPPORTS
    chosen = lean(read, gold, ["fm2_dev"] * len(read))
    assert chosen["shift_adopted"] and chosen["options"]["reader_shift"] < -1.0
    fm2 = chosen["out_of_fold"]["fm2_dev"]
    assert fm2["recalibrated"]["refutes_recall"] > fm2["as read"]["refutes_recall"] + 0.2
    assert fm2["recalibrated"]["calibration_error"] < fm2["as read"]["calibration_error"]

    read, gold = _readings(rng, 4000, lean=0.0)  # no lean: nothing to gain from a shift
    fair = lean(read, gold, ["fm2_dev"] * len(read))
    assert not fair["shift_adopted"] and fair["options"]["reader_shift"] == 0.0
    p = np.array([0.2, 0.5, 0.9])
    assert np.allclose(recalibrated(p, fair["options"]) >= 0.5, p >= 0.5)  # the same answers


def test_each_cut_trades_supports_recall_for_refutes_recall_and_undoes_to_as_read() -> None:
    read, gold = _readings(np.random.default_rng(1), 2000, lean=1.5)
    supports = np.array([f["supports"] for f in read])
    files = np.array(["fm2_dev"] * len(read))
    table = cut_table(supports, np.array(gold), files)
    as_read_cut, highest = table[cut_name(CUTS[0])]["fm2_dev"], table[cut_name(CUTS[-1])]["fm2_dev"]
    assert as_read_cut["paired"]["difference"] == 0.0  # the first cut is the reading as is
    assert highest["refutes_recall"] > as_read_cut["refutes_recall"]
    assert highest["supports_recall"] < as_read_cut["supports_recall"]
    # a verdict's recalibrated share, undone, is the share as read (the guard's cuts read it)
    shares = as_read(recalibrated(supports, {"reader_scale": 0.4317, "reader_shift": -0.1}),
                     0.4317, -0.1)  # fmt: skip
    assert np.allclose(shares, np.clip(supports, 1e-6, 1 - 1e-6), atol=1e-6)
