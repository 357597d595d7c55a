"""FEVEROUS claim files and submission files (jsonl), read into typed records.

Claim files are the official FEVEROUS layout, one JSON object a line::

    {"id": 3385, "claim": "…", "label": "SUPPORTS",
     "evidence": [{"content": ["Page_sentence_0", "Page_cell_0_1_2"], "context": {…}}, …],
     "challenge": "Numerical Reasoning"}

Official files start with a dummy record (``"id": ""``, ``"claim": ""``); it is detected and
skipped, and files without it (``dev_sample50.jsonl``) read the same. TabFact-derived files add
``"gold_tables": ["Page_table_1"]`` and have empty evidence.

Submission lines are the official scorer's input plus the claim's id and text::

    {"id": 3385, "claim": "…", "predicted_label": "SUPPORTS",
     "predicted_evidence": [["Page", "sentence", "0"], ["Page", "cell", "0_1_2"]]}

Readers never raise on a bad line: they yield a :class:`MalformedLine` (1-based line number and
reason) in its place, and the caller skips and reports it. Opening the file can raise ``OSError``.

Element ids map to the official ``[page, type, position]`` triples with
:func:`~feverous_es.index.element_ids.element_to_triple` and back with
:func:`~feverous_es.index.element_ids.triple_to_element`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import orjson

from feverous_es.errors import FormatError
from feverous_es.index.element_ids import Triple, element_to_triple, triple_to_element

T = TypeVar("T")

SUPPORTS = "SUPPORTS"
REFUTES = "REFUTES"
NOT_ENOUGH_INFO = "NOT ENOUGH INFO"
LABELS = (SUPPORTS, REFUTES, NOT_ENOUGH_INFO)


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    """One claim of a FEVEROUS claim file.

    ``evidence`` holds the gold evidence sets, each the element ids of one official
    ``evidence[i].content`` (``"Page_sentence_0"``, …); one complete set is enough to verify the
    claim. ``label`` is ``None`` in a blind file, upper-cased otherwise. ``gold_tables`` names the
    tables (``"Page_table_t"``) of TabFact-derived claims. ``line_no`` is 1-based.
    """

    id: int | str
    claim: str
    label: str | None = None
    evidence: tuple[tuple[str, ...], ...] = ()
    challenge: str | None = None
    gold_tables: tuple[str, ...] = ()
    line_no: int = 0

    @property
    def key(self) -> str:
        """The id as a string: predictions are matched to claims by it (``3385`` == ``"3385"``)."""
        return str(self.id)

    def evidence_triples(self) -> list[list[Triple]]:
        """The gold sets as official triples."""
        return [[element_to_triple(e) for e in group] for group in self.evidence]


@dataclass(frozen=True, slots=True)
class PredictionRecord:
    """One line of a submission file: the predicted label and evidence triples, in order
    (order matters: the scorer keeps the first 5 sentences and first 25 cell-type elements).
    ``id`` is ``None`` when the line has none (then lines match claims by position)."""

    id: int | str | None
    predicted_label: str
    predicted_evidence: tuple[Triple, ...] = ()
    claim: str | None = None
    line_no: int = 0

    @property
    def key(self) -> str | None:
        return None if self.id is None else str(self.id)


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """A line a reader skipped: its 1-based number in the file and why."""

    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line_no}: {self.reason}"


class _Bad(ValueError):
    """A reason a line is malformed (internal)."""


def submission_line(
    claim_id: int | str,
    claim: str,
    label: str,
    evidence: Iterable[str | Sequence[str]],
) -> dict[str, Any]:
    """The official submission record for one claim.

    ``evidence`` is the predicted evidence in rank order, as element ids (``"Page_cell_0_1_2"``)
    or ``(page, type, position)`` triples; it is written as given (order and any duplicates
    kept). ``label`` must be one of :data:`LABELS` (any case). Raises ``FormatError``
    otherwise.
    """
    upper = label.upper() if isinstance(label, str) else label
    if upper not in LABELS:
        raise FormatError(f"predicted label must be one of {', '.join(LABELS)}, not {label!r}")
    triples = []
    for item in evidence:
        if isinstance(item, str):
            triples.append(list(element_to_triple(item)))
        else:
            page, kind, position = item
            triple_to_element(page, kind, position)
            triples.append([page, kind, position])
    return {"id": claim_id, "claim": claim, "predicted_label": upper, "predicted_evidence": triples}


def dumps_submission_line(record: dict[str, Any]) -> bytes:
    """One submission record as a jsonl line (UTF-8, newline-terminated)."""
    return orjson.dumps(record) + b"\n"


def read_claims(path: str | os.PathLike[str]) -> Iterator[ClaimRecord | MalformedLine]:
    """Claims of a FEVEROUS claim file in file order; a malformed line yields a
    :class:`MalformedLine` instead. A leading dummy record is skipped. Raises ``OSError`` if the
    file cannot be opened."""
    with open(path, "rb") as lines:
        yield from parse_claims(lines)


def read_predictions(path: str | os.PathLike[str]) -> Iterator[PredictionRecord | MalformedLine]:
    """Predictions of a submission file in file order (see :func:`parse_predictions`)."""
    with open(path, "rb") as lines:
        yield from parse_predictions(lines)


def parse_claims(lines: Iterable[bytes | str]) -> Iterator[ClaimRecord | MalformedLine]:
    """:func:`read_claims` over lines already read (tests, streams)."""
    yield from _parsed(lines, _is_dummy, _claim)


def parse_predictions(lines: Iterable[bytes | str]) -> Iterator[PredictionRecord | MalformedLine]:
    """Submission lines: ``predicted_label`` and ``predicted_evidence`` required; the evidence as
    official triples or as element ids (the official ``evaluate.py`` input accepts ids); integer
    positions are taken as strings. ``id`` optional; other fields (gold ones too) are ignored."""
    yield from _parsed(lines, _is_dummy_prediction, _prediction)


def _parsed(
    lines: Iterable[bytes | str],
    is_dummy: Callable[[dict[str, Any]], bool],
    parse: Callable[[dict[str, Any], int], T],
) -> Iterator[T | MalformedLine]:
    """Each line parsed by ``parse``, or the reason it is malformed; a dummy first line is
    skipped."""
    for line_no, record in _records(lines, is_dummy):
        if isinstance(record, MalformedLine):
            yield record
            continue
        try:
            yield parse(record, line_no)
        except _Bad as exc:
            yield MalformedLine(line_no, str(exc))


def _records(
    lines: Iterable[bytes | str], is_dummy: Callable[[dict[str, Any]], bool]
) -> Iterator[tuple[int, dict[str, Any] | MalformedLine]]:
    """Parsed JSON objects with their line numbers; blank lines are skipped, and so is a first
    record that ``is_dummy`` (the official files' placeholder first line)."""
    first = True
    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            yield line_no, MalformedLine(line_no, f"not JSON ({exc.msg})")
            first = False
            continue
        if not isinstance(record, dict):
            yield line_no, MalformedLine(line_no, f"not a JSON object but {type(record).__name__}")
            first = False
            continue
        if first and is_dummy(record):
            first = False
            continue
        first = False
        yield line_no, record


def _is_dummy(record: dict[str, Any]) -> bool:
    """The official dummy claim: empty or missing id and no claim text."""
    return record.get("id") in ("", None) and not record.get("claim")


def _is_dummy_prediction(record: dict[str, Any]) -> bool:
    """A dummy that also predicts nothing (a real id-less prediction has a label)."""
    return _is_dummy(record) and not record.get("predicted_label")


def _id(record: dict[str, Any], required: bool) -> int | str | None:
    value = record.get("id")
    if value is None or value == "":
        if required:
            raise _Bad("no id")
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _Bad(f"id must be a number or a string, not {value!r}")
    return value


def _claim(record: dict[str, Any], line_no: int) -> ClaimRecord:
    claim_id = _id(record, required=True)
    assert claim_id is not None
    claim = record.get("claim")
    if not isinstance(claim, str) or not claim.strip():
        raise _Bad(f"claim {claim_id}: no claim text")
    label = record.get("label")
    if label in (None, ""):
        label = None
    elif not isinstance(label, str) or label.upper() not in LABELS:
        raise _Bad(f"claim {claim_id}: unknown label {label!r}")
    else:
        label = label.upper()
    challenge = record.get("challenge")
    if challenge is not None and not isinstance(challenge, str):
        raise _Bad(f"claim {claim_id}: challenge must be a string")
    return ClaimRecord(
        id=claim_id,
        claim=claim,
        label=label,
        evidence=_evidence_sets(record.get("evidence"), claim_id),
        challenge=challenge or None,
        gold_tables=_gold_tables(record.get("gold_tables"), claim_id),
        line_no=line_no,
    )


def _evidence_sets(value: Any, claim_id: int | str) -> tuple[tuple[str, ...], ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise _Bad(f"claim {claim_id}: evidence must be a list")
    sets = []
    for group in value:
        content = group.get("content") if isinstance(group, dict) else group
        if not isinstance(content, list) or not all(isinstance(e, str) for e in content):
            raise _Bad(f"claim {claim_id}: an evidence set's content must be a list of ids")
        for element in content:
            try:
                element_to_triple(element)
            except ValueError as exc:
                raise _Bad(f"claim {claim_id}: {exc}") from None
        sets.append(tuple(content))
    return tuple(sets)


def _gold_tables(value: Any, claim_id: int | str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise _Bad(f"claim {claim_id}: gold_tables must be a list of table ids")
    for table in value:
        try:
            kind = element_to_triple(table)[1]
        except ValueError:
            kind = None
        if kind != "table":
            raise _Bad(f"claim {claim_id}: gold table {table!r} is not a Page_table_t id")
    return tuple(value)


def _prediction(record: dict[str, Any], line_no: int) -> PredictionRecord:
    claim_id = _id(record, required=False)
    name = f"prediction {claim_id}" if claim_id is not None else "prediction"
    if "predicted_label" not in record:
        raise _Bad(f"{name}: no predicted_label")
    label = record["predicted_label"]
    if not isinstance(label, str):
        raise _Bad(f"{name}: predicted_label must be a string, not {label!r}")
    evidence = record.get("predicted_evidence")
    if evidence is None:
        raise _Bad(f"{name}: no predicted_evidence")
    if not isinstance(evidence, list):
        raise _Bad(f"{name}: predicted_evidence must be a list")
    triples = []
    for item in evidence:
        try:
            triples.append(_triple(item))
        except ValueError as exc:
            raise _Bad(f"{name}: {exc}") from None
    claim = record.get("claim")
    return PredictionRecord(
        id=claim_id,
        predicted_label=label,
        predicted_evidence=tuple(triples),
        claim=claim if isinstance(claim, str) else None,
        line_no=line_no,
    )


def _triple(item: Any) -> Triple:
    if isinstance(item, str):
        return element_to_triple(item)
    if isinstance(item, list | tuple) and len(item) == 3:
        parts = [str(p) if isinstance(p, int) and not isinstance(p, bool) else p for p in item]
        if all(isinstance(p, str) for p in parts):
            page, kind, position = parts
            triple_to_element(page, kind, position)
            return page, kind, position
    raise FormatError(f"evidence must be [page, type, position] or an element id, not {item!r}")
