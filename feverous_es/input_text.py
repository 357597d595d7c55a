"""One rule for the text a user hands in — a claim, a search query and its page filters, a
source, a text and a title for ``entail`` — the same on the CLI, the Python API and HTTP (each
reaches it through the pipeline, the search or the entailment reader):

* a lone surrogate (half of a UTF-16 pair, which no UTF-8 text holds) is refused:
  :class:`~feverous_es.errors.BadTextError` (HTTP 422), naming its position;
* control characters (NUL, the terminal's escape and the rest of Unicode's ``Cc``) read as a
  space: the index and the models never saw them, and a NUL ends strings in some clients;
* invisible formatting characters (``Cf``: bidirectional overrides and isolates, zero-width
  spaces, the byte-order mark) are removed, so that a right-to-left override cannot make a
  claim read as another; the zero-width (non-)joiner, which some scripts spell words with,
  stays.

Everything else passes unchanged (accents, other scripts, emoji).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from feverous_es.errors import BadTextError

_JOINERS = {"\u200c", "\u200d"}


def clean_text(text: str, what: str = "the claim") -> str:
    """``text`` by the rule above (``what`` names it in the error)."""
    if text.isprintable():  # the common case: nothing to look at
        return text
    return "".join(char for _, char in _cleaned(text, what))


def clean_text_offsets(text: str, what: str = "the text") -> tuple[str, list[int]]:
    """:func:`clean_text` of ``text``, and for each of its characters (and its end) the offset
    in ``text`` it came from: a span of the cleaned text maps back to the text a user sent."""
    if text.isprintable():
        return text, list(range(len(text) + 1))
    kept = list(_cleaned(text, what))
    return "".join(char for _, char in kept), [at for at, _ in kept] + [len(text)]


def _cleaned(text: str, what: str) -> Iterator[tuple[int, str]]:
    """Each character the rule keeps (or turns into a space), with its offset in ``text``."""
    for at, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Cs":
            raise BadTextError(
                f"{what} holds a lone surrogate (U+{ord(char):04X}) at character {at}: "
                "send it as valid UTF-8"
            )
        if category == "Cc" and char not in "\t\n\r":
            yield at, " "
        elif category != "Cf" or char in _JOINERS:
            yield at, char
