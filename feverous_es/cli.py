"""The ``feverous-es`` command line."""

from __future__ import annotations

import dataclasses
import importlib
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from feverous_es import __version__
from feverous_es.console import console, fail, print_json, progress_bars, user_errors
from feverous_es.index.backends import STORES, open_store, open_writer
from feverous_es.index.dump.wiki import WHOLE, Part
from feverous_es.index.search import MODES
from feverous_es.params import (
    COUNT,
    DEVICE_OPTION,
    EXISTING_FILE,
    FILE,
    PATH,
    F,
    batch_size_option,
    json_option,
    max_length_option,
    out_option,
)
from feverous_es.serve.cli import ServeOptions, run_server, serve_options
from feverous_es.verdict.readers import READERS

DEFAULT_INDEX = "feverous-index"


class PartType(click.ParamType):
    """``I/N``: one part of a build written by N workers (:class:`Part`)."""

    name = "I/N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Part):
            return value
        try:
            return Part.parse(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


PART = PartType()
STORE_OPTION = click.option("--store", type=click.Choice(STORES), default="embedded")
INDEX_OPTION = click.option(
    "--index", "index_dir", default=DEFAULT_INDEX, type=PATH,
    help="Index directory (embedded store).",
)  # fmt: skip
READER_OPTION = click.option(
    "--reader", type=click.Choice(list(READERS)), default=None,
    help="The verdict's reader: auto (three MiniLM students, and the large reader again on "
    "the pairs they are unsure of), default (the students alone: fastest) or large (mpnet "
    "110 M averaged with a student on every pair; ~0.3 GB more memory; joined from its parts "
    "on first use). Default: the configuration's (auto); entail's: default.",
)  # fmt: skip


# The commands of other modules, by name: imported when one is run (or help lists them), so
# that `verify` and `search` start without importing training and export code.
LAZY_COMMANDS = {
    "es": "feverous_es.index.elastic.cli:es_group",
    "train": "feverous_es.training.cli:train_group",
    "export": "feverous_es.export.cli:export_command",
    "score": "feverous_es.eval.cli:score_command",
}


class LazyGroup(click.Group):
    """A group that holds :data:`LAZY_COMMANDS` beside its own commands."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *LAZY_COMMANDS])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY_COMMANDS:
            module, _, name = LAZY_COMMANDS[cmd_name].partition(":")
            return getattr(importlib.import_module(module), name)
        return super().get_command(ctx, cmd_name)


# Every option's default shows in --help (click leaves out None and an off flag's).
@click.group(
    cls=LazyGroup,
    context_settings={"help_option_names": ["-h", "--help"], "show_default": True},
)
@click.version_option(__version__, prog_name="feverous-es")
def main() -> None:
    """Fact verification over Wikipedia (FEVEROUS): index a dump, then search it.

    Start with `feverous-es index wiki.db`, then `feverous-es search "some claim"`.
    """


@main.command()
@click.argument("wiki_db", type=PATH)
@out_option(
    "Index directory (embedded store). Re-running resumes an interrupted build.",
    default=DEFAULT_INDEX,
)
@STORE_OPTION
@click.option("--limit", type=COUNT, help="Index only the dump's first N pages.")
@click.option(
    "--part", type=PART, default=None,
    help="Write part I of N into one shared Elasticsearch build (N workers, started anywhere; "
    "each reads every N-th page, resumes itself, and the last to finish publishes). "
    "docs/scale.md: running N workers.",
)  # fmt: skip
@batch_size_option(
    None,
    "Texts per embedding batch, formed by length (default 8 on the CPU, two batches side by "
    "side; 32 on a GPU). A text's vector does not depend on it.",
)
@max_length_option(128, "Tokens per text kept for embedding.")
@click.option(
    "--chunk-size", type=COUNT, default=20_000,
    help="Elements per atomic write; an interrupt loses at most the chunk in flight.",
)  # fmt: skip
@click.option(
    "--vector-cache", type=PATH, default=None,
    help="A file of vectors kept from earlier builds (made if missing): texts it holds are not "
    "embedded again, new ones are added. Share it between the embedded and the Elasticsearch "
    "build of a dump, a build's parts, or a build started again; it refuses another embedder's.",
)  # fmt: skip
@DEVICE_OPTION
@json_option("the build report")
@user_errors()
def index(
    wiki_db: Path,
    out: Path,
    store: str,
    limit: int | None,
    part: Part | None,
    batch_size: int | None,
    max_length: int,
    chunk_size: int,
    vector_cache: Path | None,
    device: str,
    as_json: bool,
) -> None:
    """Index every sentence, list item, table cell and caption of a FEVEROUS WIKI_DB.

    Elements get BM25 text (Papelo linearization) and a MiniLM vector (one per table row,
    shared by its cells); pages get a title + intro record for page retrieval.
    """
    from feverous_es.index.building.builder import build
    from feverous_es.index.building.vector_cache import VectorCache
    from feverous_es.index.dump.wiki import WikiDB
    from feverous_es.runtime.embedder import Embedder

    part = part or WHOLE
    if not part.whole and store != "elasticsearch":
        fail("--part writes one build from several workers: it needs --store elasticsearch")
    db = WikiDB(wiki_db)
    until = db.rowid_at(limit)
    total = db.count(until=until, part=part)
    embedder = Embedder(max_length=max_length, batch_size=batch_size, device=device)
    cache = VectorCache(vector_cache, embedder, embedder.identity) if vector_cache else None
    survey = db.survey(part) if not part.whole else None  # the parts' dump, checked as one
    writer = open_writer(store, out, embedder.dim, part, (total, db.count(until=until)),
                         survey.fingerprint if survey else "")  # fmt: skip
    destination = writer.destination
    try:
        state = writer.state()
        done = total - db.count(state.last_rowid, until=until, part=part)
        with progress_bars(disable=as_json) as update:
            pages, elements = [min(done, total)], [0]
            started = time.perf_counter()
            update("indexing", pages[0], total)

            def advance(rows: int, added: int) -> None:
                pages[0] += rows
                elements[0] += added
                rate = elements[0] / max(time.perf_counter() - started, 1e-9)
                update("indexing", pages[0], total, f"pages, {rate:,.0f} el/s")

            def publishing() -> None:
                update("publishing", 0, 1)

            report = build(
                db,
                writer,
                cache or embedder,
                limit=limit,
                part=part,
                chunk_elements=chunk_size,
                on_progress=advance,
                on_publish=publishing,
            )
            update("publishing", 1, 1)
    finally:
        writer.close()
        db.close()
        if cache is not None:
            cache.close()

    reuse = None
    if cache is not None:
        reuse = {"file": str(cache.path), "reused": cache.reused, "embedded": cache.embedded}
    if as_json:
        print_json({**dataclasses.asdict(report), "index": destination, "store": store,
                    "part": str(part), "vector_cache": reuse})  # fmt: skip
        return
    final = report.state
    if report.waiting_for:
        console.print(
            f"part {part} complete ({final.elements:,} elements, {final.pages:,} pages) -> "
            f"{destination}; not published yet: waiting for part(s) "
            f"{', '.join(report.waiting_for)} (the last part to finish publishes the build)"
        )
        return
    if report.already_complete:
        console.print(
            f"{destination}: index already complete ({final.elements:,} elements); nothing to do"
        )
        return
    console.print(
        f"indexed {report.pages:,} pages -> {report.elements:,} elements, "
        f"{report.vectors:,} vectors in {report.wall_seconds:,.1f} s "
        f"(index total: {final.elements:,} elements, {final.pages:,} pages) -> {destination}"
    )
    if reuse:
        console.print(
            f"vectors: {reuse['reused']:,} texts read from {reuse['file']}, "
            f"{reuse['embedded']:,} embedded and added to it"
        )
    if report.malformed:
        console.print(f"[yellow]skipped {len(report.malformed)} malformed pages:[/yellow]")
        for line in report.malformed[:10]:
            console.print(f"  {line}", highlight=False)
        if len(report.malformed) > 10:
            console.print(f"  … and {len(report.malformed) - 10} more (see --json)")


@main.command()
@click.argument("wiki_db", type=PATH)
@click.option(
    "--sample", type=COUNT,
    help="Count N pages spread over the dump and scale up, instead of every page.",
)  # fmt: skip
@click.option(
    "--measure", type=click.IntRange(min=50),
    help="Measure the embedded store's rates on N pages of this dump (a real build in a "
    "temporary directory) instead of using the stored ones.",
)  # fmt: skip
@click.option(
    "--rates", "rates_file", type=PATH,
    help="Rates file to project with (default: the rates stored with the package).",
)  # fmt: skip
@click.option("--save-rates", type=PATH, help="Write the rates used to this file.")
@click.option("--device", type=click.Choice(["cpu", "cuda"]), default="cpu",
              help="Device --measure embeds on.")  # fmt: skip
@click.option(
    "--workers", type=COUNT, default=None,
    help="Also plan an Elasticsearch build split among N workers (`index --part I/N`), one "
    "machine of the rates' kind each: the wall time, and where the cluster's bulk rate stops "
    "more workers from paying.",
)  # fmt: skip
@max_length_option(128, "Tokens per text kept for embedding (as for `index`).")
@json_option("counts, rates and projections")
@user_errors()
def plan(
    wiki_db: Path,
    sample: int | None,
    measure: int | None,
    rates_file: Path | None,
    save_rates: Path | None,
    device: str,
    workers: int | None,
    max_length: int,
    as_json: bool,
) -> None:
    """Say what indexing WIKI_DB will cost before building: one pass counts its pages,
    elements, vectors and tokens, and measured rates turn them into build time, peak memory
    and disk for the embedded store and Elasticsearch, on CPU and GPU."""
    from feverous_es.index.building import plan as planning
    from feverous_es.index.dump.wiki import WikiDB

    rates = planning.BuildRates.load(rates_file or planning.RATES_FILE)
    with WikiDB(wiki_db) as db:
        with progress_bars(disable=as_json) as update:
            total = sample or db.count()
            counted = planning.count_dump(
                db,
                planning.TokenCounter(max_length),
                sample=sample,
                on_progress=lambda pages: update("counting", pages, total, "pages"),
            )
            update("counting", counted.counted_pages, total, "pages")
        if measure:
            measured = planning.measure_rates(
                db, measure, device=device,
                on_stage=None if as_json else lambda text: console.print(f"measuring: {text}"),
            )  # fmt: skip
            rates = rates.updated(measured)
    if save_rates:
        rates.save(save_rates)
    counts = counted.scaled()
    projections = planning.project(counts, rates)
    parts = planning.project_parts(projections, workers) if workers else []
    if as_json:
        print_json({
            "counts": dataclasses.asdict(counts), "rates": dataclasses.asdict(rates),
            "projections": [dataclasses.asdict(p) for p in projections],
            "parts": [dataclasses.asdict(p) for p in parts],
        })  # fmt: skip
        return
    from feverous_es.index.building.plan_report import print_plan

    print_plan(Console(), counts, rates, projections, parts)


@main.command()
@click.argument("query")
@INDEX_OPTION
@STORE_OPTION
@click.option("-k", "--top", "k", type=COUNT, default=10)
@click.option("--mode", type=click.Choice(MODES), default="hybrid")
@click.option("--page", "pages", multiple=True, help="Only elements of this page (repeatable).")
@click.option(
    "--type", "types", multiple=True,
    type=click.Choice(["sentence", "cell", "header_cell", "table_caption", "item"]),
    help="Only elements of this type (repeatable).",
)  # fmt: skip
@json_option("hits")
@user_errors()
def search(
    query: str,
    index_dir: Path,
    store: str,
    k: int,
    mode: str,
    pages: tuple[str, ...],
    types: tuple[str, ...],
    as_json: bool,
) -> None:
    """Search the index for QUERY: BM25, kNN or both fused."""
    from feverous_es.index.elements import ElementType
    from feverous_es.index.search import hit_to_dict
    from feverous_es.index.search import search as search_store
    from feverous_es.index.store import Filters
    from feverous_es.runtime.embedder import Embedder

    if not query.strip():
        fail("the query is empty", 2)
    index_store = open_store(store, index_dir)
    try:
        filters = Filters(pages=pages, types=tuple(ElementType(t) for t in types))
        hits = search_store(index_store, lambda t: Embedder().embed(t), query, k, mode, filters)
    finally:
        index_store.close()
    if as_json:
        print_json([hit_to_dict(h) for h in hits])
        return
    table = Table("score", "id", "type", "text", show_lines=False)
    for hit in hits:
        table.add_row(f"{hit.score:.3f}", hit.element.id, hit.element.type, hit.element.text)
    Console().print(table)


def _pipeline_options(command: F) -> F:
    """The options every claim-pipeline command shares: index, store, plugins, hops, device."""
    for option in reversed([
        INDEX_OPTION,
        STORE_OPTION,
        click.option(
            "--config", "config_path", type=PATH,
            help="Pipeline configuration (TOML); default $FEVEROUS_ES_CONFIG.",
        ),
        click.option(
            "--plugin", "plugins", multiple=True, metavar="STAGE=NAME",
            help="Run a stage with another plugin, e.g. --plugin reranker=retrieval.",
        ),
        click.option(
            "--hops", type=click.IntRange(min=0), help="Next-hop rounds (default 7; 0: none)."
        ),
        DEVICE_OPTION,
        READER_OPTION,
    ]):  # fmt: skip
        command = option(command)
    return command


def _open_pipeline(
    index_dir: Path, store: str, config_path: Path | None, plugins: tuple[str, ...],
    hops: int | None, device: str, reader: str | None,
):  # fmt: skip
    from feverous_es.plugins.config import load_config
    from feverous_es.verify.pipeline import Pipeline

    chosen = {}
    for item in plugins:
        stage, sep, name = item.partition("=")
        if not sep or not name:
            fail(f"--plugin takes STAGE=NAME, not {item!r}", 2)
        chosen[stage.strip()] = name.strip()
    config = load_config(config_path, plugins=chosen, hops=hops, reader=reader)
    return Pipeline.open(index_dir, store=store, config=config, device=device)


@main.command()
@click.argument("claim")
@_pipeline_options
@click.option("--explain", is_flag=True, help="Also show the pages retrieved and each hop.")
@json_option("the result")
@user_errors()
def verify(
    claim: str, index_dir: Path, store: str, config_path: Path | None, plugins: tuple[str, ...],
    hops: int | None, device: str, reader: str | None, explain: bool, as_json: bool,
) -> None:  # fmt: skip
    """Verify CLAIM: a verdict (SUPPORTS / REFUTES / NOT ENOUGH INFO), its confidence, and the
    evidence that decided it."""
    from feverous_es.output.report import print_result, result_to_dict
    from feverous_es.runtime.model import models_loaded

    if not claim.strip():
        fail("the claim is empty", 2)
    with _open_pipeline(index_dir, store, config_path, plugins, hops, device, reader) as pipeline:
        result = pipeline.verify(claim)
    if as_json:
        # this process's models: what the claim loaded (the large tier only where it was unsure)
        loaded = [dataclasses.asdict(load) for load in models_loaded()]
        print_json({**result_to_dict(result), "loaded": loaded})
    else:
        print_result(Console(), result, explain=explain)


@main.command()
@click.argument("claims", type=EXISTING_FILE)
@out_option(
    "Submission jsonl; an existing one is resumed (claims already in it are skipped).",
    type=FILE,
    required=True,
)
@_pipeline_options
@batch_size_option(16, "Claims per batch (model inference batches across them).")
@json_option("the summary")
@user_errors()
def predict(
    claims: Path, out: Path, index_dir: Path, store: str, config_path: Path | None,
    plugins: tuple[str, ...], hops: int | None, device: str, reader: str | None,
    batch_size: int, as_json: bool,
) -> None:  # fmt: skip
    """Predict every claim of CLAIMS (official FEVEROUS jsonl, dummy first line or not) into
    official submission lines: predicted_label and predicted_evidence."""
    from feverous_es.output.predict import predict_file

    done, total = [0], [0]
    with (
        _open_pipeline(index_dir, store, config_path, plugins, hops, device, reader) as pipeline,
        progress_bars(disable=as_json) as update,
    ):

        def on_start(claims: int) -> None:
            total[0] = claims
            update("predicting", 0, claims, "claims")

        def on_batch(claims: int) -> None:
            done[0] += claims
            update("predicting", done[0], total[0], "claims")

        report = predict_file(
            pipeline, claims, out, batch_size=batch_size, on_start=on_start, on_batch=on_batch
        )
    if as_json:
        print_json({**dataclasses.asdict(report), "out": str(out)})
        return
    console.print(
        f"predicted {report.predicted:,} claims ({report.already_done:,} already in {out}) "
        f"-> {out}; labels: "
        + (", ".join(f"{label} {n:,}" for label, n in sorted(report.labels.items())) or "none")
    )
    for bad in report.malformed[:10]:
        console.print(f"[yellow]skipped line {bad.line_no}:[/yellow] {bad.reason}", highlight=False)
    if len(report.malformed) > 10:
        console.print(f"… and {len(report.malformed) - 10} more malformed lines (see --json)")


@main.command()
@_pipeline_options
@serve_options
def serve(
    index_dir: Path, store: str, config_path: Path | None, plugins: tuple[str, ...],
    hops: int | None, device: str, reader: str | None, **service: Any,
) -> None:  # fmt: skip
    """Serve the verifier over HTTP: a JSON API (POST /v1/verify, /v1/verify/batch,
    /v1/search, /v1/entail; GET /v1/health; OpenAPI at /openapi.json) and a page at / where a
    person checks a claim and sees the evidence that decided it. Models load once; concurrent
    requests queue for one pipeline and are batched. With $FEVEROUS_ES_SERVE_TOKEN set, API
    requests need "Authorization: Bearer <token>".

    For operators: GET /v1/health/live (the process answers, its pipeline runs) and
    /v1/health/ready (the store answers, the queue has room; 503 with the reason's category
    otherwise), also on a port of their own that a flood cannot fill (--probe-port),
    Prometheus metrics at /metrics, one JSON log line a request on standard error
    (X-Request-ID honoured and returned), a deadline a request (--request-timeout, then 504),
    and on SIGTERM a drain: no new connections, the requests in flight finish, those still
    queued at --drain-timeout get 503, exit 0. Bound to loopback, it answers only loopback
    Host names (--allowed-host)."""
    run_server(
        lambda: _open_pipeline(index_dir, store, config_path, plugins, hops, device, reader),
        store=store, location=index_dir, options=ServeOptions(**service),
    )  # fmt: skip


@main.command()
@click.argument("claim")
@click.option(
    "--evidence",
    "-e",
    "evidence",
    multiple=True,
    metavar="TEXT",
    help="Evidence to read CLAIM against, of any length; repeat for several pieces, read in "
    "order as one source (-: the whole of standard input).",
)
@click.option(
    "--evidence-file",
    "evidence_files",
    multiple=True,
    type=EXISTING_FILE,
    help="A document to read CLAIM against (UTF-8 text); repeat for several, each read on its "
    "own (no window crosses two; the answer names the one that decided; the -e texts are one "
    "more).",
)
@click.option(
    "--title", default="", show_default=False, help="The page the evidence is from ([Title] text)."
)
@click.option(
    "--model",
    type=PATH,
    default=None,
    help="Entailment model directory (instead of --reader).",
)
@READER_OPTION
@DEVICE_OPTION
@json_option("the result")
@user_errors()
def entail(
    claim: str, evidence: tuple[str, ...], evidence_files: tuple[Path, ...], title: str,
    model: Path | None, reader: str | None, device: str, as_json: bool,
) -> None:  # fmt: skip
    """Check CLAIM against a source you give, without an index or retrieval.

    The source (-e texts, --evidence-file documents: a web page, an article, of any length) is
    read in windows of its sentences. CLAIM is SUPPORTS when one window supports it (its
    P(SUPPORTS) reaches the reader's threshold, chosen on WiCE dev), REFUTES when a window
    contradicts it, else NOT ENOUGH INFO; the answer shows the window that decided it.

    A CLAIM of several sentences (a generated answer, a summary) is checked sentence by
    sentence, with a summary of which are not supported."""
    import sys

    from feverous_es.output.entail_view import print_entailment, print_text_check
    from feverous_es.verdict.entailment import EntailmentModel
    from feverous_es.verdict.windows import PIECE_SEPARATOR, sentence_spans

    if not claim.strip():
        fail("the claim is empty", 2)
    pieces = [sys.stdin.read() if e == "-" else e for e in evidence]
    files = [_read_document(path) for path in evidence_files]
    if not any(p.strip() for p in [*pieces, *files]):
        fail("the evidence is empty: give it with -e TEXT, -e - or --evidence-file PATH", 2)
    # Files beside other evidence are documents read one by one (the -e pieces: one of them).
    documents = bool(files) and len(files) + bool(pieces) > 1
    given = pieces + files
    if documents and pieces:
        given = [PIECE_SEPARATOR.join(pieces), *files]
    reading = EntailmentModel(model or reader, device=device)
    out = Console()
    if len(sentence_spans(claim)) > 1:
        check = reading.check_text(claim, given, title=title, documents=documents)
        print_json(check.to_dict()) if as_json else print_text_check(out, check)
        return
    result = reading.entail(claim, given, title=title, documents=documents)
    print_json(result.to_dict()) if as_json else print_entailment(out, result)


def _read_document(path: Path) -> str:
    """A document's text; one error line for a file that is not text."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        fail(f"{path} is not UTF-8 text (byte {error.start}): give a text document", 2)
    if "\x00" in text:
        fail(f"{path} is binary, not a text document", 2)
    return text


@main.command("plugins")
@json_option("the plugins")
def plugins_command(as_json: bool) -> None:
    """List the installed pipeline plugins per stage, and the ones configured by default."""
    from feverous_es.plugins.config import DEFAULT_PLUGINS
    from feverous_es.plugins.registry import available

    found = available()
    if as_json:
        print_json({"available": found, "default": DEFAULT_PLUGINS})
        return
    table = Table("stage", "plugin", "from", "default")
    for stage, names in found.items():
        for name, origin in sorted(names.items()):
            table.add_row(stage, name, origin, "yes" if DEFAULT_PLUGINS[stage] == name else "")
    Console().print(table)


if __name__ == "__main__":
    main()
