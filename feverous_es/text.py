"""How feverous-es reads a claim: words, tokens, numbers and names, in one place.

Each splitting serves one stage and they differ on purpose (changing one moves that stage's
figures):

* :func:`tokens` — lower-cased, accent-folded word and number tokens, ``1,000`` read as
  ``1000``: the verdict's computed table facts (:mod:`feverous_es.verdict.table_facts`), the
  share of a claim's words its evidence holds, and the premise's row choice;
* :func:`words` — every ``\\w+`` run, case- and accent-folded: the table ranking's whole-cell
  matches (``"1986 - 87"`` → ``1986``, ``87``);
* :class:`Terms` — the BM25 fields' analysis (stemmed, stop words out), for scoring a table the
  way the index scored its cells;
* :func:`number_strings` / :func:`numbers_in` / :func:`number_value` — numbers as written (the
  table ranking), as values in running text (math hints), and of one token (facts);
* :func:`claim_spans` — every span of a few words as a title key: page retrieval's title
  matches and the verdict's "which pages does the claim name";
* :data:`STOPWORDS` (content words) and :data:`SPAN_STOPWORDS` (a title span made only of these
  names no page).
"""

from __future__ import annotations

import functools
import re

from feverous_es.accents import fold_accents
from feverous_es.index.elements import title_keys
from feverous_es.index.embedded.analysis import BM25Analyzer

_TOKEN = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")
# A cell that starts with a number (after a currency sign): "98", "12,100", "3 - 1", "$ 1.5 m";
# not "may 4 , 2008", whose number is a day.
_CELL_NUMBER = re.compile(r"\s*[$£€]?\s*(-?\d+(?:\.\d+)?)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")


def word_set(text: str) -> frozenset[str]:
    """The space-separated words of ``text`` as a set (for word lists written as one string)."""
    return frozenset(text.split())


STOPWORDS = word_set(
    "the a an of in on at to for by with and or be is was were are been have has had that this "
    "there as from which who whom it its their his her he she they them during do did does "
    "will would can could than then when where while into out up down also all any"
)


_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
    "twenty",
]
_TENS = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS: dict[str, int] = {word: value for value, word in enumerate(_UNITS)}
NUMBER_WORDS.update({word: 30 + 10 * i for i, word in enumerate(_TENS)})
NUMBER_WORDS.update({"hundred": 100, "thousand": 1000, "million": 1_000_000})

_NUMBER_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
# Integers with thousands separators, decimals, plain integers; a leading minus counts.
_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")


_NUMBER_STRING = re.compile(r"^[-+]?\d[\d,.:]*%?$")
_WORD = re.compile(r"\w+")
# A run of capitalised words, the small words of names allowed inside ("Bank of England").
_EDGE_PUNCTUATION = " \t\"'\u201c\u201d\u2018\u2019.,;:!?()[]{}"
_POSSESSIVE = re.compile("['\u2019]s$")
# Spans made only of these never name the page a claim is about.
SPAN_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "for",
        "from",
        "has",
        "have",
        "he",
        "her",
        "his",
        "in",
        "is",
        "it",
        "its",
        "of",
        "on",
        "or",
        "she",
        "that",
        "the",
        "their",
        "they",
        "this",
        "to",
        "was",
        "were",
        "which",
        "who",
        "with",
    ]
)


def tokens(text: str) -> list[str]:
    """Lower-cased, accent-folded word and number tokens (``1,000`` reads as ``1000``)."""
    return _TOKEN.findall(_THOUSANDS.sub("", fold_accents(text).lower()))


def content_words(text: str) -> set[str]:
    """The words of ``text`` that carry content: tokens that are neither stop words nor numbers."""
    return {w for w in tokens(text) if w not in STOPWORDS and number_value(w) is None}


def marked_words(text: str) -> set[str]:
    """The tokens of ``text`` that evidence is marked by for a reader: all but stop words
    (numbers included, unlike :func:`content_words`)."""
    return set(tokens(text)) - STOPWORDS


def number_value(token: str) -> float | None:
    if token in NUMBER_WORDS:
        return float(NUMBER_WORDS[token])
    try:
        return float(token)
    except ValueError:
        return None


def cell_number(text: str) -> float | None:
    """The number a cell starts with (``"3 - 1"`` → 3, ``"1,024 km"`` → 1024), else None."""
    match = _CELL_NUMBER.match(_THOUSANDS.sub("", text))
    return float(match.group(1)) if match else None


def number_words(text: str) -> list[str]:
    """The number words of ``text`` (``four``, ``Thirty``), lower-cased, once each, in order."""
    return list(dict.fromkeys(match.group(1).lower() for match in _NUMBER_WORD.finditer(text)))


def numbers_in(text: str) -> list[float]:
    """The numbers written in digits in running ``text`` (thousands separators and a leading
    minus read), in order."""
    return [float(m.group(0).replace(",", "")) for m in _NUMBER_IN_TEXT.finditer(text)]


def claim_spans(claim: str, max_words: int = 10) -> dict[str, tuple[int, int]]:
    """Every span of up to ``max_words`` words, as a title key -> (start, end) word range.
    Punctuation inside a span is kept ("Russell County, Alabama"), at its edges dropped."""
    words = claim.split()
    spans: dict[str, tuple[int, int]] = {}
    for start in range(len(words)):
        for end in range(start + 1, min(start + max_words, len(words)) + 1):
            text = _POSSESSIVE.sub("", " ".join(words[start:end]).strip(_EDGE_PUNCTUATION))
            text = text.strip(_EDGE_PUNCTUATION)
            if len(text) < 2 or all(w.lower() in SPAN_STOPWORDS for w in text.split()):
                continue
            for key in title_keys(text)[:1]:
                spans.setdefault(key, (start, end))
    return spans


def number_strings(text: str) -> set[str]:
    """The whitespace-separated words of ``text`` that are numbers, as written (``1,000``,
    ``3:2``, ``45%``), edge punctuation stripped."""
    return {word.strip(".,") for word in text.split() if _NUMBER_STRING.match(word)}


# A claim's candidate stage reads ~6,000 elements; these bounds keep a few claims' worth (claims
# in a row often share tables) without a long-running server growing by hundreds of MB.
ANALYSIS_CACHE_SIZE = 50_000


@functools.lru_cache(maxsize=ANALYSIS_CACHE_SIZE)
def words(text: str) -> tuple[str, ...]:
    """Lower-cased, accent-folded words, punctuation dropped ("1986 - 87" -> 1986, 87)."""
    return tuple(_WORD.findall(fold_accents(text).casefold()))


class Terms:
    """The BM25 fields' analysis (accents folded, lower-cased, stop words out, stemmed), the
    last ``ANALYSIS_CACHE_SIZE`` texts cached."""

    def __init__(self) -> None:
        self._analyzer = BM25Analyzer()
        self._cache = functools.lru_cache(maxsize=ANALYSIS_CACHE_SIZE)(self._analyzer.analyze)

    def __call__(self, text: str) -> list[str]:
        return self._cache(text)
