"""Where the benches find the project's data: ``../shared/data`` beside the checkout, or the
directory ``FEVEROUS_ES_DATA`` names (its ``minifeverous/`` holds the dump and claim files)."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("FEVEROUS_ES_DATA") or REPO.parent / "shared" / "data")
MINI = DATA / "minifeverous"
