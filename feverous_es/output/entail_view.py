"""``entail``'s answers for people: one claim with its probabilities and the span that decided
it, or a text sentence by sentence, readable at a glance."""

from __future__ import annotations

import re

from rich.console import Console
from rich.text import Text

from feverous_es.output.report import LABEL_STYLE
from feverous_es.plugins.interfaces import Label
from feverous_es.text import marked_words
from feverous_es.verdict.entailment import Entailment, TextCheck

_WORD = re.compile(r"\w+")


def _span(answer: Entailment) -> Text:
    """The deciding window whole (at most ~120 words) on one line, the claim's words in bold."""
    shown = Text(f"“{' '.join(answer.window.text.split())}”", style="italic")
    claim_words = marked_words(answer.claim)
    for match in _WORD.finditer(shown.plain):
        if marked_words(match.group()) & claim_words:
            shown.stylize("bold", match.start(), match.end())
    source = "the source" if answer.document is None else f"document {answer.document + 1}"
    where = f"chars {answer.window.start}-{answer.window.end} of {source}"
    return Text.assemble("  ", shown, (f"  ({where})", "dim"))


def print_entailment(out: Console, answer: Entailment) -> None:
    """One claim: its label, the three probabilities as bars, and the deciding window."""
    out.print(f"claim: {answer.claim}", highlight=False)
    style = LABEL_STYLE[answer.label]
    out.print(
        f"[bold {style}]{answer.label.value}[/]  (P(SUPPORTS) "
        f"{answer.probabilities.get(Label.SUPPORTS, 0.0):.2f}, supported at "
        f"≥ {answer.threshold:.2f}; {answer.windows} window(s) of the source read)"
    )
    for label, p in sorted(answer.probabilities.items(), key=lambda item: -item[1]):
        out.print(f"  {label.value:<16} {p:6.3f}  {'█' * round(p * 20)}", highlight=False)
    out.print(_span(answer))


def print_text_check(out: Console, check: TextCheck) -> None:
    """A text's sentences, each with its label and deciding span, then the summary."""
    for number, (_, answer) in enumerate(check.sentences, 1):
        style = LABEL_STYLE[answer.label]
        line = Text.assemble(
            (f"{number:>2}. ", "bold"),
            (f"{answer.label.value:<16}", f"bold {style}"),
            (f" {answer.probabilities.get(Label.SUPPORTS, 0.0):.2f}  ", "dim"),
            answer.claim,
        )
        out.print(line)
        out.print(_span(answer))
    summary = check.summary()
    missing = ", ".join(str(i + 1) for i in summary["not_supported"]) or "none"
    out.print(
        f"[bold]{summary['supported']} of {summary['sentences']} sentences supported[/]"
        f" by the source; not supported: {missing}",
        highlight=False,
    )
