"""The benchmark driver (`python -m bench`, bench/run.py): the records hold their declared
figures, the pages are generated from them, a rerun whose figures moved is not kept, and no
condition, record or bench module names a machine's path or parses its own arguments."""

from __future__ import annotations

import ast
import inspect
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import run
from bench.context import Context
from tests.conftest import REPO


def measured_share(context: Context, *, share: float, index_too: bool = False) -> dict:
    """A condition's function: the share it is given (and the index it reads, when asked), and
    a table keyed by numbers, as Hits@k are."""
    found = {"share": share, "hits": {1: share}}
    return {**found, **({"index": context.place("index").name} if index_too else {})}


PROBE = "tests.bench.test_bench_driver:measured_share"


def _driver_says(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "bench", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, cwd=REPO)


def test_every_record_says_how_it_was_made() -> None:
    for path in (REPO / "bench" / "results").glob("*.json"):
        record = json.loads(path.read_text(encoding="utf-8"))
        assert {"command", "commit", "date", "machine", "figures"} <= record.keys(), path.name


def test_every_record_is_declared_and_holds_its_conditions_figures() -> None:
    assert run.figure_problems(*run.load()) == []


def test_a_docstring_or_a_comment_changes_no_code_a_record_ran() -> None:
    """A record is stale for code that changed, not for a module's prose: the same statements
    under other docstrings (a dataclass field's too) and comments are the same code; a changed
    statement is not."""
    from bench.results import code_of

    before = 'def f(x):\n    """Old words."""\n    return x + 1\n'
    reworded = '"""A module."""\n\n\ndef f(x):  # why\n    """New words."""\n\n    return x + 1\n'
    assert code_of(before) == code_of(reworded)
    assert code_of(before) != code_of(before.replace("x + 1", "x + 2"))
    assert code_of("def f(:\n") is None
    field = 'class C:\n    x: int = 1\n    """What x is."""\n'
    assert code_of(field) == code_of(field.replace("What x is", "What x is for"))
    assert code_of(field) != code_of(field.replace("= 1", "= 2"))


def test_a_record_older_than_the_code_it_measured_is_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`bench check` names a record made before a commit that changed what its condition
    covers (here: the verdict code since 3d9ce11), and none made at HEAD; the page says so
    where it shows the older record's figures."""
    from bench.results import changed_since

    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, cwd=REPO, check=True).stdout.strip()  # fmt: skip
    assert "commit(s) since changed" in changed_since("3d9ce11", ["feverous_es/verdict"])
    assert changed_since(head, ["feverous_es/verdict"]) is None
    assert changed_since(f"{head}+changes", ["feverous_es/verdict"]) is None
    assert "lacks" in changed_since("0123abc", ["feverous_es/verdict"])
    conditions, _ = run.load()
    verdict = {"verdict": conditions["verdict"]}
    kept = json.loads((REPO / "bench" / "results" / "verdict.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    for made_at, stale in (("3d9ce11", True), (head, False)):
        record = {**kept, "commit": made_at}
        (tmp_path / "verdict.json").write_text(json.dumps(record), encoding="utf-8")
        found = list(run.stale_records(verdict))
        assert bool(found) == stale and all(f.startswith("verdict: made at") for f in found)
        assert (run.OLDER_THAN_THE_CODE in run.page(verdict)) == stale


def test_a_record_is_stale_only_for_the_code_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record lists the files of the code its process imported (`depends`): a later commit to
    one of them makes it stale, a commit to code it never ran does not, whatever its area's
    paths say."""
    import feverous_es.verdict.classifier  # noqa: F401  (what this record "ran")
    from bench.results import depends, same_code

    found = depends()
    assert "feverous_es/verdict/classifier.py" in found["files"]
    assert all(f.startswith(("feverous_es/", "bench/")) for f in found["files"])
    condition = run.load()[0]["verdict"]
    ran = {"depends": {"files": ["feverous_es/serve/app.py"]}}
    assert run.covered(condition, ran) == ("feverous_es/serve/app.py", *condition.extra_covers)
    assert run.covered(condition, {}) == condition.covers  # older records: the area's paths
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD~1"], capture_output=True,
                          text=True, cwd=REPO, check=True).stdout.strip()  # fmt: skip
    changed = subprocess.run(["git", "diff", "--name-only", "HEAD~1..HEAD"], capture_output=True,
                             text=True, cwd=REPO, check=True).stdout.split()  # fmt: skip
    kept = json.loads((REPO / "bench" / "results" / "verdict.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    verdict = {"verdict": condition}
    # a file whose code the last commit changed (not its docstrings alone: that is no change)
    code = [f for f in changed if f.endswith(".py") and f not in run.DRIVER
            and not same_code(f, head)][:1]  # fmt: skip
    for files, stale in (([], False), (code, True)):
        record = {**kept, "commit": head, "depends": {"files": files}}
        (tmp_path / "verdict.json").write_text(json.dumps(record), encoding="utf-8")
        assert bool(list(run.stale_records(verdict))) == (stale and bool(files))


def test_a_record_fingerprints_the_index_the_dump_and_the_cpu_it_read(tmp_path: Path) -> None:
    """Answers can move with the index a machine built or the CPU's kernels while the code
    stays: a record holds the CPU's instruction sets, the dump's hash and the index's vectors'
    hash, which changes when a vector does."""
    from bench.results import KERNEL_FLAGS, record

    index, wiki = tmp_path / "index", tmp_path / "wiki.db"
    index.mkdir()
    (index / "meta.json").write_text('{"format": "feverous-es-embedded"}', encoding="utf-8")
    (index / "vectors.f16").write_bytes(bytes(768))
    wiki.write_bytes(b"SQLite format 3")
    places = {"index": index, "wiki": wiki, "pairs": None}

    def made() -> dict:
        path = record(tmp_path / "out", "c", {}, "python -m bench run c", {}, places)
        return json.loads(path.read_text(encoding="utf-8"))["depends"]

    first = made()
    assert set(first["cpu"]["flags"]) <= set(KERNEL_FLAGS)
    assert first["index"]["meta"] == {"format": "feverous-es-embedded"}
    assert "pairs" not in first and len(first["wiki"]["sha256"]) == 16
    (index / "vectors.f16").write_bytes(bytes(767) + b"\x01")
    assert made()["index"]["vectors_sha256"] != first["index"]["vectors_sha256"]


def test_a_record_holds_the_data_files_it_read_and_check_sees_one_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A claim file replaced under a record (a new dump's claims) moves its figures while the
    code stays: the record holds the hash of every data file the process opened, whichever
    module opened it, and `bench check` names the one that changed."""
    import bench.results as results

    data = tmp_path / "data"
    (data / "minifeverous").mkdir(parents=True)
    claims = data / "minifeverous" / "fm2_dev.jsonl"
    claims.write_text('{"id": 1}\n', encoding="utf-8")
    monkeypatch.setattr(results, "DATA", data)
    monkeypatch.setattr(results, "_DATA_ROOT", f"{data}/")
    monkeypatch.setattr(results, "_DATA_READ", set())
    with claims.open(encoding="utf-8") as file:  # as a condition reads it
        file.read()
    (tmp_path / "elsewhere.txt").write_text("not data", encoding="utf-8")
    held = results.depends()["data"]
    assert list(held) == ["minifeverous/fm2_dev.jsonl"] and len(held[next(iter(held))]) == 16
    assert results.data_changed(held) is None
    claims.write_text('{"id": 2}\n', encoding="utf-8")
    assert results.data_changed(held) == "its data file minifeverous/fm2_dev.jsonl changed since"
    claims.unlink()  # a clone with no data beside it: missing, not changed
    assert results.data_changed(held) is None
    assert results.data_missing(held) == ["minifeverous/fm2_dev.jsonl"]


def test_the_benchmarks_page_and_the_readme_tables_match_the_records() -> None:
    result = _driver_says("page", "--check")
    assert result.returncode == 0, result.stderr


def test_a_figure_outside_its_tolerance_or_missing_is_named() -> None:
    condition = run.Condition(
        name="x", area="Verdict", about="", run=PROBE,
        figures=(
            run.Figure(row="a", key="set.share", expect=0.5, tolerance=0.01),
            run.Figure(row="b", key="set.missing"),
        ),
    )  # fmt: skip
    found = run.problems(condition, {"figures": {"set": {"share": 0.52}}})
    assert found == [
        "x: set.share = 0.52, expected 0.5 ± 0.01",
        "x: no 'set.missing' in the record",
    ]
    assert run.problems(condition, {"figures": {"set": {"share": 0.505, "missing": 1}}}) == []
    bounded = run.Condition(
        name="soak", area="Speed", about="", run=PROBE,
        figures=(run.Figure(row="slope", key="slope", maximum=2.0),),
    )  # fmt: skip
    assert run.problems(bounded, {"figures": {"slope": -10.0}}) == []  # falling memory holds
    too_fast = run.problems(bounded, {"figures": {"slope": 13.0}})
    assert too_fast == ["soak: slope = 13.0, at most 2.0"]


@pytest.mark.parametrize(("measured", "kept"), [(0.5, True), (0.7, False)])
def test_a_rerun_is_kept_only_when_its_figures_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, measured: float, kept: bool
) -> None:
    monkeypatch.setattr(run, "RESULTS", tmp_path)
    condition = run.Condition(
        name="probe", area="Verdict", about="", run=PROBE, options={"share": 0.9},
        figures=(
            run.Figure(row="share", key="share", expect=0.5, tolerance=0.01),
            run.Figure(row="hits@1", key="hits.1"),  # a number key, as the record holds it
        ),
    )  # fmt: skip
    status = run.run(condition, Context("probe"), keep=True, overrides={"share": measured})
    assert status == (0 if kept else 1)
    assert (tmp_path / "probe.json").is_file() is kept
    if kept:  # the command that reruns it, the options as run: no machine's paths
        record = json.loads((tmp_path / "probe.json").read_text(encoding="utf-8"))
        assert record["command"] == "python -m bench run probe --option share=0.5"
        assert record["options"] == {"share": 0.5}


def test_a_place_or_option_the_run_lacks_is_one_line() -> None:
    needs_index = run.Condition(
        name="p", area="Verdict", about="", run=PROBE, options={"share": 1.0, "index_too": True}
    )
    unknown = run.Condition(name="q", area="Verdict", about="", run=PROBE, options={"shar": 1.0})
    with pytest.raises(run.BenchError, match=r"p needs --index \(the mini index\)"):
        run.run(needs_index, Context("p"), keep=False)
    probe = re.escape(PROBE)
    with pytest.raises(run.BenchError, match=rf"q: {probe} .*shar"):
        run.run(unknown, Context("q"), keep=False)


def test_the_command_line_reruns_a_condition_with_an_option_changed() -> None:
    result = _driver_says("run", "label-leaks", "--wiki", "no/such/wiki.db")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "error: label-leaks: --wiki no/such/wiki.db: no such file or directory"
    )
    assert run.option("limit=50") == ("limit", 50)
    assert run.option('models=["large"]') == ("models", ["large"])
    assert run.option("reader=large") == ("reader", "large")


def test_every_bench_module_is_reached_from_a_condition_and_parses_no_arguments() -> None:
    conditions, _ = run.load()
    reached = {c.run.partition(":")[0] for c in conditions.values()}
    modules = {f"bench.{p.stem}" for p in (REPO / "bench").glob("*.py")}
    imported = {
        node.module
        for name in reached
        for node in ast.walk(ast.parse((REPO / f"{name.replace('.', '/')}.py").read_text()))
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("bench.")
    }
    driver = {"bench.run", "bench.__main__", "bench.__init__"}
    assert modules - reached - imported - driver == set()
    for condition in conditions.values():  # a misspelt option fails here, not after a long run
        inspect.signature(condition.function()).bind(Context(condition.name), **condition.options)
    for path in (REPO / "bench").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert path.name == "run.py" or "argparse" not in text, path.name
        assert "sys.path" not in text, path.name


def test_no_condition_or_record_names_a_machines_path() -> None:
    machine_path = re.compile(r"(/work/|/home/|/tmp/|shared/data|indexes/mini)")
    texts = [REPO / "bench" / "conditions.toml", *(REPO / "bench" / "results").glob("*.json")]
    for path in texts:
        assert not machine_path.search(path.read_text(encoding="utf-8")), path.name


def test_a_pages_block_is_regenerated_from_its_record() -> None:
    conditions, _ = run.load()
    stale = "before\n<!-- bench:retrieval-300 -->\n| stale | figures |\n<!-- /bench -->\nafter\n"
    fresh = run.generated_blocks(stale, conditions, "../bench/results/")
    record = json.loads((REPO / "bench" / "results" / "retrieval-300.json").read_text())
    recall = record["figures"]["feverous_s"]["pipeline_complete_recall@5"]
    assert fresh.startswith("before\n<!-- bench:retrieval-300 -->\n| |")
    assert f"| FEVEROUS-S complete recall@5 | {recall:.3f} |" in fresh
    assert "stale" not in fresh and fresh.endswith("<!-- /bench -->\nafter\n")
    assert "([full record](../bench/results/retrieval-300.json))" in fresh  # as docs/ links it


def test_a_short_one_column_table_is_written_as_one_row() -> None:
    """The page reads a few figures of one kind across (fewer lines to scan); a longer or
    wider table keeps a row per figure."""
    record = {"figures": {"a": 0.5, "b": 0.25, "c": 0.125}}
    figures = [run.Figure(row=name, key=name, format=".1%") for name in "abc"]
    assert run.grid(figures, record).splitlines() == [
        "| | a | b | c |", "|---|---|---|---|", "|  | 50.0 % | 25.0 % | 12.5 % |"]  # fmt: skip
    many = [run.Figure(row=f"r{n}", key="a") for n in range(run.ONE_ROW_AT_MOST + 1)]
    assert len(run.grid(many, record).splitlines()) == 2 + len(many)
    wide = [run.Figure(row="a", key="a", column=c) for c in ("x", "y")]
    assert run.grid(wide, record).splitlines()[-1] == "| a | 0.5 | 0.5 |"
