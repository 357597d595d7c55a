from __future__ import annotations

import gzip
import os
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("FEVEROUS_ES_SHARED", REPO.parent / "shared"))
MINI = SHARED / "data" / "minifeverous"
DEV_SAMPLE = SHARED / "data" / "feverous" / "dev_sample50.jsonl"
SAMPLE_DB = REPO / "sample" / "wiki.db"


@pytest.fixture(scope="session")
def mini_wiki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole mini-FEVEROUS wiki.db (21,693 real pages), unpacked once per session."""
    source = MINI / "wiki.db.gz"
    if not source.exists():
        pytest.fail(f"{source} is missing: the tests need ../shared/data beside the repo")
    target = tmp_path_factory.mktemp("mini") / "wiki.db"
    with gzip.open(source) as src, target.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return target
