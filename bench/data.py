"""Where the benches find the project's data: ``../shared/data`` beside the checkout, or the
directory ``FEVEROUS_ES_DATA`` names (its ``minifeverous/`` holds the dump and claim files)."""

from __future__ import annotations

import io
import os
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
