"""Math hints for the verdict model (Malon 2021, §5).

Number words become digits ("four equals 4"), then every number of the claim and premise is
listed from least to greatest ("LEAST 0 less than 1 less than 30 GREATEST"), so a model that
sees numbers as digit strings gets their order spelled out.

    >>> math_hints("Four teams played in 2017.", "[Cup] 30 teams entered, one won.")
    'four equals 4 one equals 1 LEAST 1 less than 4 less than 30 less than 2017 GREATEST'
"""

from __future__ import annotations

import re

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

_WORD = re.compile(r"\b(" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
# Integers with thousands separators, decimals, plain integers; a leading minus counts.
_NUMBER = re.compile(r"(?<![\w.])-?\d{1,3}(?:,\d{3})+(?:\.\d+)?|(?<![\w.])-?\d+(?:\.\d+)?")


def _value(text: str) -> float:
    return float(text.replace(",", ""))


def _format(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def math_hints(claim: str, premise: str) -> str:
    """The hint prefix for ``premise`` (empty when neither text holds a number)."""
    text = f"{claim} {premise}"
    conversions = dict.fromkeys(match.group(1).lower() for match in _WORD.finditer(text))
    hints = [f"{word} equals {NUMBER_WORDS[word]}" for word in conversions]
    values = {_value(m.group(0)) for m in _NUMBER.finditer(text)}
    values.update(float(NUMBER_WORDS[word]) for word in conversions)
    if values:
        ordered = " less than ".join(_format(v) for v in sorted(values))
        hints.append(f"LEAST {ordered} GREATEST")
    return " ".join(hints)
