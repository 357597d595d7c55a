"""The texts the models read, shared by inference and training so the two cannot drift.

* premise: the evidence's Papelo linearizations in evidence order, each starting with its
  ``[Title]``, optionally after math hints (seed 000 §5);
* seq2seq input (seed 000 §4): ``missing: <pages> [HYP] <claim> <premise>``.
"""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.plugins.interfaces import Candidate
from feverous_es.verify.math_hints import math_hints


def premise(claim: str, evidence: Sequence[Candidate], *, hints: bool = False) -> str:
    text = " ".join(candidate.element.linearized for candidate in evidence)
    prefix = math_hints(claim, text) if hints else ""
    return f"{prefix} {text}" if prefix else text


def seq2seq_input(
    claim: str, evidence: Sequence[Candidate], *, prefix: str = "missing:", hints: bool = False
) -> str:
    pages = " ".join(dict.fromkeys(c.element.page for c in evidence))
    return f"{prefix} {pages} [HYP] {claim} {premise(claim, evidence, hints=hints)}".strip()
