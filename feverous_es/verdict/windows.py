"""A long source cut into windows the reader can read whole, and a text cut into its claims.

The reader sees a claim and ~190 tokens of evidence; a web page or an article is thousands. So a
source is split into sentences (``sentencex``, Wikimedia's rule-based segmenter: no model, no
torch) and read in windows of consecutive sentences of at most ``words`` words, each starting
halfway through the last (a fact stated across a window's edge is whole in the next). Every
span keeps its character offsets into the source, so an answer can point at the words that
decided it. A claim against a long source is read against the windows that share the most
words with it (:func:`closest`): the reader's cost stays bounded by the claim, not the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import sentencex

from feverous_es.text import marked_words

WINDOW_WORDS = 120  # ~160 tokens: with a claim, what a 192-token reader reads untruncated
# Windows read a claim, for a reader without grounding.json (a reader's own is chosen on four
# kinds of source: docs/grounding.md). The closest few by shared words read as well as all of
# them, and the cost no longer grows with the source.
MAX_WINDOWS = 2
PIECE_SEPARATOR = "\n"  # evidence given as several pieces is one source, a piece a line


@dataclass(frozen=True)
class Span:
    """``text`` = ``source[start:end]`` of the text it was cut from."""

    start: int
    end: int
    text: str

    def to_dict(self) -> dict[str, int | str]:
        return {"start": self.start, "end": self.end, "text": self.text}


def sentence_spans(text: str, language: str = "en") -> list[Span]:
    """The sentences of ``text``, without their surrounding whitespace; empty ones left out."""
    spans, at = [], 0
    for segment in sentencex.segment(language, text):
        start = text.index(segment, at)  # segments are consecutive slices of the text
        at = start + len(segment)
        stripped = segment.strip()
        if stripped:
            first = start + segment.index(stripped)
            spans.append(Span(first, first + len(stripped), stripped))
    return spans


@dataclass(frozen=True)
class Window:
    """A run of a source's sentences the reader reads at once: its ``span`` in the source as
    read (the text rule applied), its ``sentences``, and ``sent``: the same span in the source
    as the user sent it (:func:`sent_span`; None: not mapped)."""

    span: Span
    sentences: tuple[Span, ...]
    document: int | None = None  # the document it is in, when the source is several
    sent: Span | None = None

    def texts(self) -> list[str]:
        return [sentence.text for sentence in self.sentences]

    @cached_property
    def words(self) -> set[str]:
        """The words a claim is matched by (stop words aside), worked out once a window."""
        return marked_words(self.span.text)


@dataclass(frozen=True)
class Source:
    """Evidence as one text: ``pieces`` joined a line each, as given (offsets point into what
    the user sent), and its sentences (each piece split on its own, so no sentence spans two
    pieces)."""

    text: str
    sentences: tuple[Span, ...]

    @classmethod
    def of(cls, pieces: Sequence[str]) -> Source:
        sentences, at = [], 0
        for piece in pieces:
            sentences += [Span(s.start + at, s.end + at, s.text) for s in sentence_spans(piece)]
            at += len(piece) + len(PIECE_SEPARATOR)
        return cls(PIECE_SEPARATOR.join(pieces), tuple(sentences))

    def windows(self, words: int = WINDOW_WORDS, document: int | None = None) -> list[Window]:
        """The windows that cover the source, in order (``document``: the source's number
        among several, carried by each window)."""
        sentences, counts = self.sentences, [len(s.text.split()) for s in self.sentences]
        windows, first = [], 0
        while first < len(sentences):
            last, total = first, counts[first]
            while last + 1 < len(sentences) and total + counts[last + 1] <= words:
                last += 1
                total += counts[last]
            start, end = sentences[first].start, sentences[last].end
            span = Span(start, end, self.text[start:end])
            windows.append(Window(span, sentences[first : last + 1], document))
            if last == len(sentences) - 1:
                break
            # The next window starts at the sentence that reaches past this one's middle.
            half, seen, step = total / 2, 0, first
            while step < last and seen + counts[step] <= half:
                seen += counts[step]
                step += 1
            first = max(step, first + 1)
        return windows


def sent_span(start: int, end: int, offsets: Sequence[int], text: str) -> Span:
    """``[start, end)`` of a text cleaned by the text rule as a span of ``text``, the text it
    was cleaned from (``offsets``: :func:`~feverous_es.input_text.clean_text_offsets`'s)."""
    first, last = offsets[start], offsets[end - 1] + 1 if end > start else offsets[start]
    return Span(first, last, text[first:last])


def joined_offsets(pieces: Sequence[str], offsets: Sequence[Sequence[int]]) -> list[int]:
    """The offsets of cleaned ``pieces`` joined a line each (as :class:`Source` joins them) into
    the pieces as sent, joined the same way: one list for the whole source."""
    joined: list[int] = []
    at = 0
    for n, (piece, piece_offsets) in enumerate(zip(pieces, offsets, strict=True)):
        if n:  # the separator before this piece
            joined += range(at - len(PIECE_SEPARATOR), at)
        joined += [at + o for o in piece_offsets[:-1]]
        at += len(piece) + len(PIECE_SEPARATOR)
    return [*joined, at - len(PIECE_SEPARATOR)]


def document_windows(documents: Sequence[str], words: int = WINDOW_WORDS) -> list[Window]:
    """The windows of several documents, each cut on its own: no window crosses from one
    document into the next (a claim's support must be whole in one of them)."""
    return [
        window
        for number, text in enumerate(documents)
        for window in Source.of([text]).windows(words, document=number)
    ]


def by_overlap(claim: str, windows: Sequence[Window]) -> list[int]:
    """The windows' indices, those sharing the most of the claim's words first (stop words
    aside; the earlier window on a tie)."""
    wanted = marked_words(claim)
    shared = [len(wanted & window.words) for window in windows]
    return sorted(range(len(windows)), key=lambda i: -shared[i])


def closest(claim: str, windows: Sequence[Window], keep: int | None) -> list[int]:
    """The indices, in source order, of the ``keep`` windows of :func:`by_overlap`; None
    keeps them all."""
    if keep is None or len(windows) <= keep:
        return list(range(len(windows)))
    return sorted(by_overlap(claim, windows)[:keep])
