"""Math hints for the verdict model (Malon 2021, §5).

Number words become digits ("four equals 4"), then every number of the claim and premise is
listed from least to greatest ("LEAST 0 less than 1 less than 30 GREATEST"), so a model that
sees numbers as digit strings gets their order spelled out.

    >>> math_hints("Four teams played in 2017.", "[Cup] 30 teams entered, one won.")
    'four equals 4 one equals 1 LEAST 1 less than 4 less than 30 less than 2017 GREATEST'
"""

from __future__ import annotations

from feverous_es.text import NUMBER_WORDS, number_words, numbers_in


def _format(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def math_hints(claim: str, premise: str) -> str:
    """The hint prefix for ``premise`` (empty when neither text holds a number)."""
    text = f"{claim} {premise}"
    conversions = number_words(text)
    hints = [f"{word} equals {NUMBER_WORDS[word]}" for word in conversions]
    values = set(numbers_in(text))
    values.update(float(NUMBER_WORDS[word]) for word in conversions)
    if values:
        ordered = " less than ".join(_format(v) for v in sorted(values))
        hints.append(f"LEAST {ordered} GREATEST")
    return " ".join(hints)
