"""`feverous-es index`: every element exactly once, resumable, and clear about bad input."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from click.testing import CliRunner

from feverous_es.cli import main
from feverous_es.index.embedded import EmbeddedStore
from tests.conftest import DEV_SAMPLE, raw_element_ids, write_wiki


def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


def assert_exactly_once(index: Path, wiki: Path) -> int:
    """The index holds each element id of the dump once, with nothing else."""
    expected: dict[str, list[str]] = {}
    for page_id, data in sqlite3.connect(wiki).execute("SELECT id, data FROM wiki"):
        expected[page_id] = raw_element_ids(page_id, json.loads(data))
    store = EmbeddedStore(index)
    try:
        total = 0
        for page_id, ids in expected.items():
            got = [e.id for e in store.page_elements(page_id)]
            assert len(got) == len(set(got)), f"duplicates in {page_id}"
            assert sorted(got) == sorted(ids), page_id
            total += len(ids)
        assert store.state().elements == total
        assert store.state().complete
        return total
    finally:
        store.close()


@pytest.fixture(scope="module")
def third_slice(mini_slice: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every third page of the real slice: 89 pages, 50 with tables (25 captioned), wiki-link
    markup, 12,776 elements. The build tests index these (the whole slice's embedding alone
    takes over a minute here)."""
    with sqlite3.connect(mini_slice) as db:
        rows = db.execute("SELECT id, data FROM wiki ORDER BY rowid").fetchall()
    return write_wiki(tmp_path_factory.mktemp("third") / "wiki.db", rows[::3])


@pytest.fixture(scope="module")
def killed_build(third_slice: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bool]:
    """The real slice's index, built the hard way: ``kill -9`` once two chunks are saved, then
    the same command again, which resumes. Returns the index and whether the killed build
    was left incomplete. The other tests read the resumed index (one build serves all)."""
    out = tmp_path_factory.mktemp("idx") / "index"
    command = [sys.executable, "-m", "feverous_es.cli", "index", str(third_slice),
               "--out", str(out), "--chunk-size", "500"]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            time.sleep(0.2)
            if (out / "elements.sqlite").exists() and EmbeddedStore(out).state().next_seq >= 2:
                break
        else:
            pytest.fail("the build wrote no chunk in time")
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    killed_incomplete = not EmbeddedStore(out).state().complete
    code, output = run_cli("index", str(third_slice), "--out", str(out), "--chunk-size", "500")
    assert code == 0, output
    return out, killed_incomplete


@pytest.fixture(scope="module")
def slice_index(killed_build: tuple[Path, bool]) -> Path:
    return killed_build[0]


def test_kill_9_mid_build_then_resume_holds_every_element_once(
    killed_build: tuple[Path, bool], third_slice: Path
) -> None:
    index, killed_incomplete = killed_build
    assert killed_incomplete
    assert assert_exactly_once(index, third_slice) > 10_000


def test_elements_fetched_by_id_are_the_dump_elements(slice_index: Path, third_slice: Path) -> None:
    page_id, data = (
        sqlite3.connect(third_slice)
        .execute("SELECT id, data FROM wiki WHERE data LIKE '%\"caption\"%' LIMIT 1")
        .fetchone()
    )
    page = json.loads(data)
    ids = raw_element_ids(page_id, page)
    store = EmbeddedStore(slice_index)
    elements = store.get_elements(ids)
    store.close()
    assert [e.id for e in elements] == ids
    first_cell = page["table_0"]["table"][1][0]
    (cell,) = [e for e in elements if e.id == f"{page_id}_{first_cell['id']}"]
    assert cell.text == first_cell["value"]
    assert "{{ KEY" in cell.linearized


@pytest.mark.parametrize("mode", ["bm25", "knn", "hybrid"])
def test_search_finds_a_sentence_by_its_words(
    slice_index: Path, third_slice: Path, mode: str
) -> None:
    page_id, data = (
        sqlite3.connect(third_slice)
        .execute("SELECT id, data FROM wiki WHERE data LIKE '%[[%' LIMIT 1")
        .fetchone()
    )
    key = next(k for k in json.loads(data)["order"] if k.startswith("sentence_"))
    (sentence,) = EmbeddedStore(slice_index).get_elements([f"{page_id}_{key}"])
    code, output = run_cli("search", sentence.text, "--index", str(slice_index), "--mode", mode,
                           "--json", "-k", "5")  # fmt: skip
    assert code == 0, output
    hits = json.loads(output)
    assert len(hits) == 5
    assert hits[0]["id"] == sentence.id
    assert hits[0]["score"] >= hits[-1]["score"]


def test_rerun_on_finished_index_is_a_noop(slice_index: Path, third_slice: Path) -> None:
    before = EmbeddedStore(slice_index).state()
    code, output = run_cli("index", str(third_slice), "--out", str(slice_index))
    assert code == 0
    assert "already complete" in output
    assert EmbeddedStore(slice_index).state() == before


ID = re.compile(
    r"^(?P<page>.+?)_(?P<kind>header_cell|cell|table_caption|sentence|item)_(?P<pos>.+)$"
)


def pages_from_evidence_ids(ids: list[str]) -> list[tuple[str, str]]:
    """FEVEROUS pages that hold exactly the elements the given evidence ids name."""
    by_page: dict[str, dict] = defaultdict(dict)
    for element_id in ids:
        match = ID.match(element_id)
        assert match, element_id
        page, kind, pos = match["page"], match["kind"], match["pos"]
        by_page[page].setdefault(kind, set()).add(tuple(int(p) for p in pos.split("_")))
    pages = []
    for title, kinds in by_page.items():
        data: dict = {"title": title, "order": []}
        for (i,) in sorted(kinds.get("sentence", ())):
            data[f"sentence_{i}"] = f"Sentence {i} of {title}."
            data["order"].append(f"sentence_{i}")
        cells = kinds.get("cell", set()) | kinds.get("header_cell", set())
        tables = {t for t, _, _ in cells} | {t for (t,) in kinds.get("table_caption", ())}
        for t in sorted(tables):
            height = 1 + max((r for tt, r, _ in cells if tt == t), default=0)
            width = 1 + max((c for tt, _, c in cells if tt == t), default=0)
            headers = kinds.get("header_cell", set())
            rows = [
                [
                    {
                        "id": f"{'header_cell' if (t, r, c) in headers else 'cell'}_{t}_{r}_{c}",
                        "value": f"v{r}{c}",
                        "is_header": (t, r, c) in headers,
                        "row_span": "1",
                        "column_span": 1,
                    }
                    for c in range(width)
                ]
                for r in range(height)
            ]
            data[f"table_{t}"] = {"type": "general", "table": rows}
            if (t,) in kinds.get("table_caption", ()):
                data[f"table_{t}"]["caption"] = f"Caption {t}"
            data["order"].append(f"table_{t}")
        lists: dict[int, list[int]] = defaultdict(list)
        for lst, k in sorted(kinds.get("item", ())):
            lists[lst].append(k)
        for lst, items in lists.items():
            data[f"list_{lst}"] = {
                "type": "unordered_list",
                "list": [
                    {"id": f"item_{lst}_{k}", "value": f"Item {k}", "level": 0} for k in items
                ],
            }
            data["order"].append(f"list_{lst}")
        pages.append((title, json.dumps(data, ensure_ascii=False)))
    return pages


def test_dev_sample_id_formats_round_trip(tmp_path: Path) -> None:
    ids = []
    with DEV_SAMPLE.open() as lines:
        for line in lines:
            ids += [i for s in json.loads(line)["evidence"] for i in s["content"]]
    assert {m["kind"] for m in map(ID.match, ids) if m} >= {
        "sentence",
        "cell",
        "header_cell",
        "table_caption",
        "item",
    }
    wiki = write_wiki(tmp_path / "wiki.db", pages_from_evidence_ids(ids))
    code, output = run_cli("index", str(wiki), "--out", str(tmp_path / "index"))
    assert code == 0, output
    store = EmbeddedStore(tmp_path / "index")
    found = store.get_elements(list(dict.fromkeys(ids)))
    store.close()
    assert [e.id for e in found] == list(dict.fromkeys(ids))
    assert_exactly_once(tmp_path / "index", wiki)


def test_limit_indexes_the_first_pages(third_slice: Path, tmp_path: Path) -> None:
    code, output = run_cli("index", str(third_slice), "--out", str(tmp_path / "i"), "--limit", "7",
                           "--json")  # fmt: skip
    assert code == 0, output
    report = json.loads(output)
    assert report["pages"] == 7
    assert EmbeddedStore(tmp_path / "i").state().pages == 7


def test_a_build_with_a_vector_cache_embeds_only_what_an_earlier_build_did_not(
    third_slice: Path, tmp_path: Path
) -> None:
    """The second build of the same pages reads every vector from the file (and answers a kNN
    query exactly as the first); the third, of more pages, embeds only the pages it adds."""
    from feverous_es.runtime.embedder import Embedder

    cache = tmp_path / "vectors.sqlite"
    reports = []
    for name, pages in (("first", "4"), ("second", "4"), ("third", "6")):
        out = str(tmp_path / name)
        code, output = run_cli("index", str(third_slice), "--out", out, "--limit", pages,
                               "--vector-cache", str(cache), "--json")  # fmt: skip
        assert code == 0, output
        reports.append(json.loads(output)["vector_cache"])
    first, second, third = reports
    texts = first["reused"] + first["embedded"]
    assert first["embedded"] > 0
    assert (second["reused"], second["embedded"]) == (texts, 0)
    assert third["reused"] >= texts and third["embedded"] > 0
    query = Embedder().embed(["The team won the league championship."])[0]
    answers = []
    for name in ("first", "second"):
        store = EmbeddedStore(tmp_path / name)
        try:
            answers.append([(h.element.id, h.score) for h in store.search_vector(query, 20)])
        finally:
            store.close()
    assert answers[0] == answers[1]


def test_a_vector_cache_of_another_embedder_or_no_cache_is_one_line(
    third_slice: Path, tmp_path: Path
) -> None:
    cache = tmp_path / "vectors.sqlite"
    code, output = run_cli("index", str(third_slice), "--out", str(tmp_path / "a"), "--limit", "1",
                           "--vector-cache", str(cache))  # fmt: skip
    assert code == 0, output
    other = ("--max-length", "64", "--vector-cache", str(cache))
    not_a_cache = ("--vector-cache", str((tmp_path / "notes.txt").resolve()))
    (tmp_path / "notes.txt").write_text("not a database, " * 100)
    for args, message in ((other, "holds the vectors of another embedder"),
                          (not_a_cache, "is not a vector cache")):  # fmt: skip
        code, output = run_cli("index", str(third_slice), "--out", str(tmp_path / "b"), *args)
        assert code == 1, output
        assert output.count("\n") == 1 and message in output, output


def test_malformed_page_is_skipped_counted_and_reported(tmp_path: Path) -> None:
    good = json.dumps({"title": "Good", "order": ["sentence_0"], "sentence_0": "Fine text."})
    wiki = write_wiki(tmp_path / "wiki.db", [("Broken", "{not json"), ("Good", good),
                                             ("Odd", '{"title": "Odd"}')])  # fmt: skip
    code, output = run_cli("index", str(wiki), "--out", str(tmp_path / "index"))
    assert code == 0, output
    assert "skipped 2 malformed pages" in output
    assert "Broken: invalid JSON" in output
    state = EmbeddedStore(tmp_path / "index").state()
    assert (state.elements, state.malformed) == (1, 2)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing.db", "no such file"),
        (lambda p: (p / "text.db").write_text("hello") and p / "text.db", "not a SQLite file"),
        (lambda p: write_wiki(p / "x.db", []) and _drop_wiki(p / "x.db"), "no 'wiki' table"),
    ],
)
def test_bad_dump_is_one_clear_line(tmp_path: Path, make, message: str) -> None:
    code, output = run_cli("index", str(make(tmp_path)), "--out", str(tmp_path / "index"))
    assert code == 1
    assert message in output
    assert output.strip().count("\n") == 0
    assert "Traceback" not in output


def _drop_wiki(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE wiki")
    conn.execute("CREATE TABLE other (x)")
    conn.commit()
    return path


def test_parts_split_the_dump_into_shares_that_cover_it_once(third_slice: Path) -> None:
    from feverous_es.index.dump.wiki import Part, WikiDB

    with WikiDB(third_slice) as db:
        until = db.rowid_at(30)
        shares = [[row[0] for row in db.rows(until=until, part=Part(i, 4))] for i in (1, 2, 3, 4)]
        assert sorted(r for share in shares for r in share) == [r for r, *_ in db.rows(limit=30)]
        assert [db.count(until=until, part=Part(i, 4)) for i in (1, 2, 3, 4)] == list(
            map(len, shares)
        )
        # A part resumes after the last page it wrote, within its own share.
        assert [r for r, *_ in db.rows(shares[1][2], until=until, part=Part(2, 4))] == shares[1][3:]
    assert Part.parse(" 3/8 ") == Part(3, 8)


def test_a_part_holds_the_same_pages_when_the_rowids_move(
    third_slice: Path, tmp_path: Path
) -> None:
    """A copy of the dump with other rowids (as VACUUM may renumber them; here written in
    reverse) splits into the same pages a part, and is told apart by its fingerprint."""
    from feverous_es.index.dump.wiki import Part, WikiDB, page_part, write_dump

    moved = tmp_path / "moved.db"
    with WikiDB(third_slice) as db:
        write_dump(moved, reversed([(page, data) for _, page, data in db.rows()]))
        titles = [[page for _, page, _ in db.rows(part=Part(i, 3))] for i in (1, 2, 3)]
        survey = db.survey(Part(1, 3))
    with WikiDB(moved) as copy:
        assert [sorted(p for _, p, _ in copy.rows(part=Part(i, 3))) for i in (1, 2, 3)] == [
            sorted(share) for share in titles
        ]
        assert copy.survey(Part(1, 3)).pages == survey.pages
        assert copy.survey(Part(1, 3)).fingerprint != survey.fingerprint
    assert all(page_part(page, 3) == i for i, share in enumerate(titles, 1) for page in share)
    assert all(titles)  # every part has pages


@pytest.mark.parametrize("part", ["0/3", "4/3", "3", "a/b", "1/2000"])
def test_a_bad_part_is_one_clear_line(third_slice: Path, tmp_path: Path, part: str) -> None:
    code, output = run_cli("index", str(third_slice), "--store", "elasticsearch", "--part", part)
    assert code == 2 and "not a part: give I/N" in output


def test_parts_need_elasticsearch(third_slice: Path, tmp_path: Path) -> None:
    code, output = run_cli("index", str(third_slice), "--out", str(tmp_path / "i"), "--part", "1/2")
    assert code == 1 and "--part" in output and "--store elasticsearch" in output
    assert not (tmp_path / "i").exists()


@pytest.mark.parametrize("name", ["wiki#1.db", "wiki?.db", "wiki%41.db"])
def test_a_dump_whose_name_reads_as_uri_syntax_opens(tmp_path: Path, name: str) -> None:
    """The dump is opened read-only through a SQLite URI: its path is quoted there."""
    from feverous_es.index.dump.wiki import WikiDB

    dump = write_wiki(tmp_path / name, [("1", json.dumps({"title": "A", "order": []}))])
    with WikiDB(dump) as db:
        assert len(list(db.rows())) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no stray file beside it
