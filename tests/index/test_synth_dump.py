"""bench/synth_dump.py: a dump N times larger, made of altered copies of real pages, must be a
valid FEVEROUS dump whose ids are unique and whose links resolve as the original's do."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest

from bench.synth_dump import synthesize
from feverous_es.index.dump.page import parse_page
from feverous_es.index.dump.wiki import WikiDB, write_dump
from feverous_es.index.elements import ElementType
from tests.conftest import SAMPLE_DB


@pytest.fixture(scope="module")
def tripled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synth") / "wiki-3x.db"
    with WikiDB(SAMPLE_DB) as db:
        write_dump(out, synthesize(db, 3))
    return out


def _pages(path: Path) -> dict[str, list]:
    with WikiDB(path) as db:
        return {page_id: parse_page(page_id, data).elements for _, page_id, data in db.rows()}


def _resolving(pages: dict[str, list], suffix: str) -> set[tuple[str, str]]:
    """(page, link target) of every link on pages ending in ``suffix`` that names a page of
    the dump, the target stripped of ``suffix``."""
    found = set()
    for page, elements in pages.items():
        if not page.endswith(suffix):
            continue
        for element in elements:
            for target in element.links:
                target = unicodedata.normalize("NFD", target)
                if target in pages:
                    found.add((page.removesuffix(suffix), target.removesuffix(suffix)))
    return found


def test_every_copy_has_every_page_with_new_titles_and_unique_ids(tripled: Path) -> None:
    original, grown = _pages(SAMPLE_DB), _pages(tripled)
    assert len(grown) == 3 * len(original)
    for page, elements in original.items():
        for k in (1, 2):
            copy = grown[f"{page} (copy {k})"]
            assert len(copy) == len(elements)
            assert sorted(e.type for e in copy) == sorted(e.type for e in elements)
    ids = [e.id for elements in grown.values() for e in elements]
    assert len(ids) == len(set(ids))


def test_links_resolve_within_each_copy_as_in_the_original(tripled: Path) -> None:
    grown = _pages(tripled)
    original_links = _resolving({p: e for p, e in grown.items() if "(copy" not in p}, "")
    assert original_links  # the sample has links between its pages
    for k in (1, 2):
        assert _resolving(grown, f" (copy {k})") == original_links


def test_copies_alter_words_keep_numbers_and_keep_headers_on_top(tripled: Path) -> None:
    original, grown = _pages(SAMPLE_DB), _pages(tripled)
    changed = kept_numbers = 0
    for page, elements in original.items():
        copy = grown[f"{page} (copy 1)"]
        before = sorted(e.text for e in elements if e.type is ElementType.SENTENCE)
        after = sorted(e.text for e in copy if e.type is ElementType.SENTENCE)
        changed += sum(a not in before for a in after)
        numbers = sorted(n for t in before for n in re.findall(r"\d+", t))
        kept_numbers += numbers == sorted(n for t in after for n in re.findall(r"\d+", t))
        headers = [e.row for e in copy if e.type is ElementType.HEADER_CELL and e.table == 0]
        cells = [e.row for e in copy if e.type is ElementType.CELL and e.table == 0]
        if headers and cells:
            assert max(headers) < min(cells)
    assert changed > 0.5 * sum(
        e.type is ElementType.SENTENCE for elements in original.values() for e in elements
    )
    assert kept_numbers == len(original)
