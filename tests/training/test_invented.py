"""The NEI model's invented subjects (training/invented.py): names no page holds, put where the
claim named its page."""

from __future__ import annotations

from pathlib import Path

from feverous_es.index.backends import open_store
from feverous_es.training.invented import invented_names, with_subject


def test_an_invented_subject_names_no_page_of_the_dump(sample_index: Path) -> None:
    store = open_store("embedded", sample_index)
    names = invented_names(store, seed=0)
    name = next(names)
    assert name != next(names)
    changed = with_subject("Henri Schoeman's bronze at Rio was a first.", "Henri Schoeman", name)
    assert changed == f"{name}'s bronze at Rio was a first."
    assert with_subject("A claim about nobody.", "Henri Schoeman", name) is None
    assert not store.match_titles([name.casefold(), *(w.casefold() for w in name.split())])
