"""Page retrieval's title side: which titles the spans of a claim name."""

from __future__ import annotations

from collections.abc import Sequence

from feverous_es.index.elements import title_keys
from feverous_es.retrieve.pages import match_titles

TITLES = ["Russell County, Alabama", "Alabama", "Mocăniță"]


class TitleStore:
    """The one store method title matching uses."""

    def match_titles(self, keys: Sequence[str]) -> dict[str, list[str]]:
        by_key: dict[str, list[str]] = {}
        for title in TITLES:
            for key in title_keys(title):
                by_key.setdefault(key, []).append(title)
        return {key: by_key[key] for key in keys if key in by_key}


def test_spans_inside_a_longer_match_are_dropped_and_accents_do_not_matter() -> None:
    claim = "The mocanita runs in Russell County, Alabama."
    assert [m.title for m in match_titles(TitleStore(), claim)] == [
        "Russell County, Alabama",
        "Mocăniță",
    ]
