"""What a training run tells its caller as it goes, and where a test stops it: one value every
``run`` takes (:class:`Progress`), and the view of it one fine-tuning loop takes (:class:`Steps`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

# update(phase, done, total, tokens per second: a fine-tuning's steps only, else None)
PhaseUpdate = Callable[[str, int, int, float | None], None]
# on_step(step, total steps, tokens per second)
StepUpdate = Callable[[int, int, float], None]


@dataclass(frozen=True, slots=True)
class Steps:
    """One fine-tuning's ``on_step`` after each step, and ``stop_after``: checkpoint and stop
    after that many steps of this call (a test's stand-in for a kill; the next run resumes)."""

    on_step: StepUpdate | None = None
    stop_after: int | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """``update(phase, done, total, tokens_per_second)`` after each unit of a phase (a claim
    retrieved, a training step, ...); ``stop_after`` applies to each fine-tuning of the run
    (see :class:`Steps`)."""

    update: PhaseUpdate | None = None
    stop_after: int | None = None

    def counter(self, phase: str) -> Callable[[int, int], None] | None:
        """The ``on_progress(done, total)`` of a phase that counts what it has done."""
        update = self.update
        if update is None:
            return None
        return lambda done, total: update(phase, done, total, None)

    def steps(self, phase: str = "training") -> Steps:
        """The view of a fine-tuning phase."""
        update = self.update
        if update is None:
            return Steps(stop_after=self.stop_after)
        return Steps(lambda step, total, rate: update(phase, step, total, rate), self.stop_after)


QUIET = Progress()
NO_STEPS = Steps()
