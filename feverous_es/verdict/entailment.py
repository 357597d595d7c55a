"""The entailment model read alone: a claim against a premise, three label probabilities.

The ``classifier`` verdict reads it on the premise of a claim's route; :class:`EntailmentModel`
reads it on evidence a user gives (``feverous-es entail``, ``POST /v1/entail``): a generated
text checked against its source, or the model measured without retrieval. The premise is laid
out as the verdict lays out retrieved sentences (``[Title] sentence …``, the title left out
where none is given), so the model reads what it was trained on.

Evidence of any length is read in windows of its sentences (:mod:`feverous_es.verdict.windows`:
at most ``max_windows`` a claim, those sharing the most words with it), and a claim's answer is
decided by one window, named with its offsets:

* **SUPPORTS** when the best-supporting window's P(SUPPORTS) reaches the reader's grounding
  threshold (chosen on four kinds of source and stored with the reader as ``grounding.json``; a
  source one window holds may have its own): support must be found whole in one place, as a
  reader would point at it;
* else **REFUTES** when some window reads REFUTES as its likeliest label (the one with the
  highest P(REFUTES) decides): a contradiction anywhere in the source is one, whatever else the
  source says;
* else **NOT ENOUGH INFO**, shown with the window that came closest to supporting it.

The probabilities are the deciding window's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from feverous_es.errors import EmptyClaimError, ModelError
from feverous_es.input_text import clean_text, clean_text_offsets
from feverous_es.plugins.interfaces import Label
from feverous_es.runtime.costs import METER
from feverous_es.runtime.cross_encoder import CrossEncoder
from feverous_es.runtime.model import MODEL_WORKERS
from feverous_es.verdict.math_hints import math_hints
from feverous_es.verdict.model_files import (
    grounding_settings,
    read_labels,
    softmax,
    trained_inputs,
)
from feverous_es.verdict.readers import (
    CASCADE_BELOW,
    CASCADES,
    packaged_model,
    reader_dirs,
    reader_installed,
)
from feverous_es.verdict.windows import (
    MAX_WINDOWS,
    PIECE_SEPARATOR,
    WINDOW_WORDS,
    Source,
    Span,
    Window,
    closest,
    document_windows,
    joined_offsets,
    sent_span,
    sentence_spans,
)

DEFAULT_THRESHOLD = 0.5
log = logging.getLogger(__name__)


def evidence_premise(evidence: Sequence[str], title: str = "") -> str:
    """Evidence a user gives, as the model reads evidence: ``[Title] text …``."""
    pieces = [" ".join(text.split()) for text in evidence]
    return " ".join(f"[{title}] {text}" if title else text for text in pieces if text)


@dataclass(frozen=True)
class SecondReading:
    """A source one window holds, read again by another model (``model``: a packaged role,
    e.g. ``verdict-large``) where the reader's P(SUPPORTS) of it lies in ``between``; the two
    readings' probabilities are then mixed, the second's ``weight`` to the first's
    ``1 - weight``. Short sources are where the default reader reads worst (FactCheck-GPT's
    passages), and one window is a quarter of the reads of a 1,000-word source (its four
    closest windows): the large model reads there for what the long sources' windows cost
    (docs/grounding.md)."""

    model: str
    weight: float
    between: tuple[float, float] = (0.0, 1.0)

    @classmethod
    def of(cls, settings: dict[str, Any]) -> SecondReading:
        low, high = settings.get("between", (0.0, 1.0))
        return cls(str(settings["model"]), float(settings["weight"]), (float(low), float(high)))


@dataclass(frozen=True)
class Entailment:
    """A claim read against evidence: the label (module docstring), the deciding window's
    probabilities (they sum to 1), its ``premise`` as the model read it and its ``window`` in
    the source (the evidence pieces joined a line each), of ``windows`` read."""

    claim: str
    premise: str
    label: Label
    probabilities: dict[Label, float]
    window: Span = field(default_factory=lambda: Span(0, 0, ""))
    windows: int = 1
    threshold: float = DEFAULT_THRESHOLD
    document: int | None = None  # which document decided, when the source is several

    @property
    def supported(self) -> bool:
        return self.label is Label.SUPPORTS

    def to_dict(self) -> dict[str, Any]:
        return {
            "claim": self.claim,
            "premise": self.premise,
            "label": self.label.value,
            "probabilities": {k.value: round(v, 4) for k, v in self.probabilities.items()},
            "supported": self.supported,
            "threshold": self.threshold,
            "window": self.window.to_dict(),
            "windows": self.windows,
            "document": self.document,
        }


@dataclass(frozen=True)
class TextCheck:
    """A text of several claims read against one source: each sentence (its span in the
    text) with its answer."""

    text: str
    sentences: list[tuple[Span, Entailment]]

    def summary(self) -> dict[str, Any]:
        """How many sentences, how many supported, and the indices of those that are not."""
        unsupported = [i for i, (_, answer) in enumerate(self.sentences) if not answer.supported]
        return {
            "sentences": len(self.sentences),
            "supported": len(self.sentences) - len(unsupported),
            "not_supported": unsupported,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "sentences": [
                {"start": span.start, "end": span.end, **answer.to_dict()}
                for span, answer in self.sentences
            ],
            "summary": self.summary(),
        }


class EntailmentModel:
    """An entailment model: a reader's name (``"default"``, the package's verdict model, also
    when None; ``"large"``, ``"auto"``: :mod:`~feverous_es.verdict.readers`) or a model
    directory (ONNX + tokenizer.json + config.json). A reader of several models averages their
    probabilities; a cascade (``auto``) has its second reader read the pairs the first is unsure
    of (top probability below ``cascade_below``, default the package's choice).
    ``max_length`` and ``math_hints`` default to what the (first) model was trained with (its
    ``training.json``), else 256 and no hints; ``device``: ``auto``, ``cpu`` or ``cuda``. The
    ONNX sessions load on first use."""

    def __init__(
        self,
        model: str | Path | None = None,
        *,
        device: str = "auto",
        max_length: int | None = None,
        math_hints: bool | None = None,
        cascade_below: float = CASCADE_BELOW,
    ) -> None:
        # A cascade's second reader is made on the first pair it reads (:attr:`second`):
        # opening the large tier joins and checks its 110 MB of parts, which a claim the first
        # reader is sure of never needs.
        self.cascade: str | None = None
        if (cascade := CASCADES.get(str(model))) is not None:
            model, self.cascade = cascade
            if not reader_installed(self.cascade):  # a wheel's install: the first reader only
                log.warning("the %s reader is not installed (it ships in the repository, "
                            "not in the wheel): the %s reader reads every pair alone",
                            self.cascade, model)  # fmt: skip
                self.cascade = None
        self.cascade_below = cascade_below
        self._given: dict[str, Any] = {"max_length": max_length, "math_hints": math_hints}
        self.model_dirs = reader_dirs(model or None)
        missing = [d for d in self.model_dirs if not d.exists()]
        if missing:
            raise ModelError(
                f"no verdict model at {missing[0]}: train one with `feverous-es train verdict` "
                "and give it as options.verdict.model in the pipeline configuration"
            )
        self.model_dir = self.model_dirs[0]
        directories = [d if d.is_dir() else d.parent for d in self.model_dirs]
        self.labels = read_labels(directories[0])
        if any(read_labels(d) != self.labels for d in directories[1:]):
            raise ModelError(f"the models of reader {model} name different labels: not averaged")
        trained = [trained_inputs(d) for d in directories]
        self.max_lengths = [max_length or t.get("max_length", 256) for t in trained]
        self.max_length = self.max_lengths[0]
        self.hints = trained[0].get("math_hints", False) if math_hints is None else math_hints
        self.device = device
        grounding = grounding_settings(directories[0])
        self.threshold = float(grounding.get("threshold", DEFAULT_THRESHOLD))
        # A source one window holds is read once: its P(SUPPORTS) is one reading, not the best
        # of several, and may have a threshold of its own (None: the same).
        single = grounding.get("threshold_single")
        self.threshold_single: float | None = None if single is None else float(single)
        self.window_words = int(grounding.get("window_words", WINDOW_WORDS))
        # None (stored as null): every window is read.
        self.max_windows: int | None = grounding.get("max_windows", MAX_WINDOWS)
        second = grounding.get("second_reading")
        self.second_reading = SecondReading.of(second) if second else None

    @cached_property
    def second(self) -> EntailmentModel | None:
        """The cascade's reader of the pairs the first one is unsure of (None: no cascade),
        opened on first use."""
        if self.cascade is None:
            return None
        return EntailmentModel(self.cascade, device=self.device, **self._given)

    @cached_property
    def second_reader(self) -> EntailmentModel:
        """The model of :attr:`second_reading` (its ONNX session loads on its first read)."""
        assert self.second_reading is not None
        return EntailmentModel(packaged_model(self.second_reading.model), device=self.device)

    @cached_property
    def models(self) -> list[CrossEncoder]:
        return [
            CrossEncoder(directory, device=self.device, max_length=length)
            for directory, length in zip(self.model_dirs, self.max_lengths, strict=True)
        ]

    def probabilities(self, claims: Sequence[str], premises: Sequence[str]) -> np.ndarray:
        """The label probabilities (in :attr:`labels` order) of each (claim, premise) pair."""
        given = premises
        if self.hints:
            premises = [
                f"{hints} {text}" if (hints := math_hints(claim, text)) else text
                for claim, text in zip(claims, premises, strict=True)
            ]
        pairs = list(zip(claims, premises, strict=True))
        if len(self.models) > 1 and MODEL_WORKERS.cores > 1:

            def read(model: CrossEncoder) -> np.ndarray:
                return model.logits(pairs)

            # counted into the caller's tallies: the runs are its claims' cost
            logits = list(MODEL_WORKERS.executor.map(METER.carried(read), self.models))
        else:
            logits = [model.logits(pairs) for model in self.models]
        probabilities = np.mean([softmax(rows) for rows in logits], axis=0)
        if probabilities.shape[1] != len(self.labels):
            raise ModelError(
                f"the verdict model has {probabilities.shape[1]} outputs but config.json names "
                f"{len(self.labels)} labels"
            )
        if self.cascade is not None and len(pairs):
            unsure = np.flatnonzero(probabilities.max(axis=1) < self.cascade_below).tolist()
            if unsure and self.second is not None:
                # the premises as given: the second reader adds its own hints
                probabilities[unsure] = self.second.probabilities(
                    [claims[i] for i in unsure], [given[i] for i in unsure]
                )
        return probabilities

    def entail(
        self, claim: str, evidence: Sequence[str], *, title: str = "", documents: bool = False
    ) -> Entailment:
        """``claim`` read against ``evidence`` (texts of any length, of the page ``title`` if
        given): pieces of one source, or with ``documents`` each a document of its own (a RAG
        answer's passages, an answer's sources), whose windows never cross from one into the
        next; the answer then names the document that decided (``document``, its index) and
        its window's offsets are in that document."""
        return self.entail_many([(claim, evidence)], title=title, documents=documents)[0]

    def entail_many(
        self,
        items: Sequence[tuple[str, Sequence[str]]],
        *,
        title: str = "",
        documents: bool = False,
    ) -> list[Entailment]:
        """Each (claim, evidence texts) read as :meth:`entail` reads one, every window of every
        claim in one batch."""
        claims = [" ".join(clean_text(claim).split()) for claim, _ in items]
        title = clean_text(title, "the title")
        if not all(claims):
            raise EmptyClaimError("the claim is empty")
        # A text's sentences share one source: it is split and windowed once.
        windowed: dict[tuple[str, ...], list[Window]] = {}
        read = []
        for claim, (_, evidence) in zip(claims, items, strict=True):
            if (key := tuple(evidence)) not in windowed:
                windowed[key] = self._windows(evidence, documents)
            windows = windowed[key]
            read.append([windows[i] for i in closest(claim, windows, self.max_windows)])
        premises = [[evidence_premise(w.texts(), title) for w in windows] for windows in read]
        rows = self.probabilities(
            [claim for claim, p in zip(claims, premises, strict=True) for _ in p],
            [premise for p in premises for premise in p],
        )
        wholes = [len(windowed[tuple(evidence)]) == 1 for _, evidence in items]
        if self.second_reading is not None:
            rows = self._read_again(claims, premises, wholes, rows)
        answers, at = [], 0
        for claim, windows, texts, whole in zip(claims, read, premises, wholes, strict=True):
            answers.append(self._decide(claim, windows, texts, rows[at : at + len(texts)], whole))
            at += len(texts)
        return answers

    def _read_again(
        self,
        claims: Sequence[str],
        premises: Sequence[Sequence[str]],
        wholes: Sequence[bool],
        rows: np.ndarray,
    ) -> np.ndarray:
        """``rows`` with the :attr:`second_reading` mixed into the one window of each source
        that one window holds, where the first reading's P(SUPPORTS) is in its range."""
        second = self.second_reading
        assert second is not None
        low, high = second.between
        supports = self.labels.index(Label.SUPPORTS)
        again, at = [], 0
        for n, texts in enumerate(premises):
            if wholes[n] and low <= rows[at, supports] <= high:
                again.append((n, at))
            at += len(texts)
        if not again:
            return rows
        if self.second_reader.labels != self.labels:  # checked before anything is read
            raise ModelError(f"the second reader {second.model} names other labels")
        read = self.second_reader.probabilities(
            [claims[n] for n, _ in again], [premises[n][0] for n, _ in again]
        )
        mixed = rows.copy()
        at_rows = [at for _, at in again]
        mixed[at_rows] = (1 - second.weight) * rows[at_rows] + second.weight * read
        return mixed

    def check_text(
        self, text: str, evidence: Sequence[str], *, title: str = "", documents: bool = False
    ) -> TextCheck:
        """Each sentence of ``text`` read as a claim against ``evidence`` (:meth:`entail`)."""
        cleaned, offsets = clean_text_offsets(text, "the text")
        spans = sentence_spans(cleaned)
        if not spans:
            raise EmptyClaimError("the text is empty")
        answers = self.entail_many(
            [(span.text, evidence) for span in spans], title=title, documents=documents
        )

        return TextCheck(
            text,
            [
                (sent_span(s.start, s.end, offsets, text), a)
                for s, a in zip(spans, answers, strict=True)
            ],
        )

    def _windows(self, evidence: Sequence[str], documents: bool) -> list[Window]:
        """``evidence`` in windows: as one source, or document by document; evidence with no
        sentence is refused."""
        cleaned = [clean_text_offsets(text, "the source") for text in evidence]
        texts = [text for text, _ in cleaned]
        windows = (
            document_windows(texts, self.window_words)
            if documents
            else Source.of(texts).windows(self.window_words)
        )
        if not windows:
            raise EmptyClaimError("no evidence given: entail reads a claim against evidence")
        # The answer's offsets are in the source the user sent (the page marks them there).
        if documents:
            sources = [
                (text, offsets) for text, (_, offsets) in zip(evidence, cleaned, strict=True)
            ]
        else:
            joined = joined_offsets(evidence, [offsets for _, offsets in cleaned])
            sources = [(PIECE_SEPARATOR.join(evidence), joined)]
        return [
            replace(w, sent=sent_span(w.span.start, w.span.end, offsets, text))
            for w in windows
            for text, offsets in [sources[w.document or 0]]
        ]

    def _decide(
        self,
        claim: str,
        windows: Sequence[Window],
        premises: Sequence[str],
        rows: np.ndarray,
        whole: bool = False,
    ) -> Entailment:
        """The claim's answer from its windows' probabilities (the module's rule; ``whole``:
        the source is one window)."""
        threshold = self.threshold
        if whole and self.threshold_single is not None:
            threshold = self.threshold_single
        supports = rows[:, self.labels.index(Label.SUPPORTS)]
        label, chosen = Label.SUPPORTS, int(supports.argmax())
        if supports[chosen] < threshold:
            label = Label.NOT_ENOUGH_INFO
            if Label.REFUTES in self.labels:
                refutes = self.labels.index(Label.REFUTES)
                refuting = np.flatnonzero(rows.argmax(axis=1) == refutes)
                if len(refuting):
                    label, chosen = Label.REFUTES, int(refuting[rows[refuting, refutes].argmax()])
        return Entailment(
            claim,
            premises[chosen],
            label,
            dict(zip(self.labels, map(float, rows[chosen]), strict=True)),
            window=windows[chosen].sent or windows[chosen].span,
            windows=len(windows),
            threshold=threshold,
            document=windows[chosen].document,
        )
