"""A verdict variant the conditions measure beside the product: the ``classifier`` with the
reader's SUPPORTS share shifted as well as scaled (``reader_shift``, Platt scaling's second
parameter). A shift moves decisions; the ``nei`` condition fits one and it did not pay, so the
product ships the scale alone. Importing this module registers the variant as the verdict
plugin :data:`SHIFTED` in this process; :func:`verdict_plugin` names it for a rule that shifts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from feverous_es.plugins.interfaces import PluginContext
from feverous_es.plugins.registry import register
from feverous_es.verdict.calibration import Calibration, platt
from feverous_es.verdict.classifier import ClassifierVerdict

SHIFTED = "classifier-shifted"
SHIFT_OPTION = "reader_shift"


@dataclass(frozen=True)
class ShiftedCalibration(Calibration):
    """Platt scaling of the reader's SUPPORTS share with a ``shift``."""

    shift: float = 0.0

    @property
    def as_read(self) -> bool:
        return self.scale == 1.0 and self.shift == 0.0

    def supports(self, shares: np.ndarray) -> np.ndarray:
        return platt(shares, self.scale, self.shift)


class ShiftedVerdict(ClassifierVerdict):
    """The ``classifier`` verdict whose reader's share is also shifted by ``reader_shift``."""

    def __init__(self, context: PluginContext, reader_shift: float = 0.0, **options: Any) -> None:
        super().__init__(context, **options)
        self.calibration = ShiftedCalibration(self.options.reader_scale, reader_shift)


def verdict_plugin(options: Mapping[str, Any]) -> str:
    """The verdict plugin that takes ``options``: :data:`SHIFTED` where they shift."""
    return SHIFTED if SHIFT_OPTION in options else "classifier"


def shift_of(verdict: ClassifierVerdict) -> float:
    """The shift ``verdict`` applies to the reader's share (0: the product's)."""
    calibration = verdict.calibration
    return calibration.shift if isinstance(calibration, ShiftedCalibration) else 0.0


register("verdict", SHIFTED, ShiftedVerdict)
