"""Where the benches find the project's data: ``../shared/data`` beside the checkout, or the
directory ``FEVEROUS_ES_DATA`` names (its ``minifeverous/`` holds the dump and claim files)."""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("FEVEROUS_ES_DATA") or REPO.parent / "shared" / "data")
MINI = DATA / "minifeverous"


@contextmanager
def models_at(commit: str) -> Iterator[Path]:
    """The package's models directory as ``commit`` shipped it (``git archive`` into a
    temporary directory): an earlier reader, side by side with today's, without a machine's
    path in the recorded command."""
    with tempfile.TemporaryDirectory(prefix=f"models-{commit}-") as tmp:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", commit, "feverous_es/models"],
            cwd=REPO, capture_output=True, check=True,
        ).stdout  # fmt: skip
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp) / "feverous_es" / "models"


def unpacked_mini(work: Path) -> Path:
    """The mini-FEVEROUS wiki.db, gunzipped once into ``work`` (a partial file renamed when
    whole, so an interrupted unpack is not read as a dump)."""
    target = work / "wiki.db"
    if not target.is_file():
        partial = target.with_suffix(".partial")
        with gzip.open(MINI / "wiki.db.gz") as src, partial.open("wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        partial.rename(target)
    return target
