"""One rule for the text a user hands in — a claim, a search query, a source for ``entail`` —
the same on the CLI, the Python API and HTTP (each reaches it through the pipeline, the search
or the entailment reader):

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

from feverous_es.errors import BadTextError

_JOINERS = {"\u200c", "\u200d"}


def clean_text(text: str, what: str = "the claim") -> str:
    """``text`` by the rule above (``what`` names it in the error)."""
    if text.isprintable():  # the common case: nothing to look at
        return text
    out = []
    for at, char in enumerate(text):
        category = unicodedata.category(char)
        if category == "Cs":
            raise BadTextError(
                f"{what} holds a lone surrogate (U+{ord(char):04X}) at character {at}: "
                "send it as valid UTF-8"
            )
        if category == "Cc" and char not in "\t\n\r":
            out.append(" ")
        elif category != "Cf" or char in _JOINERS:
            out.append(char)
    return "".join(out)
