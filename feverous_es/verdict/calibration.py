"""The reader's answer recalibrated where it decides: Platt scaling of its SUPPORTS share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from feverous_es.plugins.interfaces import Label


def platt(supports: np.ndarray, scale: float, shift: float) -> np.ndarray:
    """SUPPORTS shares of SUPPORTS + REFUTES recalibrated: sigmoid(``scale`` · logit(p) +
    ``shift``) (Platt scaling; p kept inside [1e-6, 1 - 1e-6]), as :class:`Calibration`
    applies it and bench/calibration.py fits it."""
    p = np.clip(np.asarray(supports, dtype=np.float64), 1e-6, 1 - 1e-6)
    return 1.0 / (1.0 + np.exp(-(scale * np.log(p / (1 - p)) + shift)))


@dataclass(frozen=True)
class Calibration:
    """Platt scaling of the reader's SUPPORTS share by ``scale`` (``reader_scale``), with no
    shift: a shift would move decisions, and none paid (bench/verdict_variants.py measures
    one)."""

    scale: float = 1.0

    @property
    def as_read(self) -> bool:
        return self.scale == 1.0

    def supports(self, shares: np.ndarray) -> np.ndarray:
        """SUPPORTS shares of SUPPORTS + REFUTES, recalibrated."""
        return platt(shares, self.scale, 0.0)

    def apply(self, labels: Sequence[Label], row: np.ndarray) -> np.ndarray:
        """The reader's probabilities ``row`` (in ``labels`` order) with SUPPORTS and REFUTES
        recalibrated; their sum, and NEI, kept."""
        if self.as_read:
            return row
        s, r = labels.index(Label.SUPPORTS), labels.index(Label.REFUTES)
        both = float(row[s] + row[r])
        if both <= 0.0:
            return row
        supports = float(self.supports(np.array([row[s] / both]))[0])
        out = row.astype(np.float64).copy()
        out[s], out[r] = supports * both, (1.0 - supports) * both
        return out.astype(row.dtype)
