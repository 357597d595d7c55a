"""A seq2seq (T5-style) model exported to ONNX, for the generator hop.

Papelo's next-hop module is a T5 model reading one input string (Malon 2021, §4):

    missing: <titles of the pages retrieved> [HYP] <claim> <evidence, each "[Title] …">

ONNX generation goes through optimum's ``ORTModelForSeq2SeqLM``, which needs the ``export``
extra (torch, transformers, optimum): these plugins are for users who trained such a model.
No T5 weights exist offline; ``feverous-es train hop`` makes one from a checkpoint you bring.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from feverous_es.errors import ModelError
from feverous_es.runtime.extras import INSTALL_HINT
from feverous_es.runtime.files import manifest_files, verified
from feverous_es.runtime.session import execution_provider
from feverous_es.runtime.tasks import TEXT2TEXT_GENERATION, check_task


class Seq2SeqModel:
    """An ONNX seq2seq model directory as optimum exports it, with its tokenizer."""

    def __init__(self, model_dir: Path, *, device: str = "auto", max_length: int = 512) -> None:
        try:
            from optimum.onnxruntime import ORTModelForSeq2SeqLM
            from transformers import AutoTokenizer
        except ImportError:
            raise ModelError(f"seq2seq models need the export extra: {INSTALL_HINT}") from None
        if not Path(model_dir).is_dir():
            raise ModelError(f"no seq2seq model directory at {model_dir}")
        check_task(Path(model_dir), TEXT2TEXT_GENERATION, "a seq2seq (hop) model")
        # Checked like every model: each graph the manifest lists (train hop writes one).
        for name in sorted(manifest_files(Path(model_dir))):
            if name.endswith(".onnx"):
                verified(Path(model_dir), name, remedy="export the model again")
        try:
            self.tokenizer = AutoTokenizer.from_pretrained(model_dir)
            self.model = ORTModelForSeq2SeqLM.from_pretrained(
                model_dir, provider=execution_provider(device)
            )
        except (OSError, ValueError) as error:
            raise ModelError(f"{model_dir} is not an exported seq2seq model: {error}") from None
        self.max_length = max_length

    def _encode(self, texts: Sequence[str]) -> dict:
        return self.tokenizer(
            list(texts), return_tensors="pt", padding=True, truncation=True,
            max_length=self.max_length,
        )  # fmt: skip

    def generate(self, texts: Sequence[str], max_new_tokens: int = 64) -> list[str]:
        inputs = self._encode(texts)
        output = self.model.generate(**inputs, max_new_tokens=max_new_tokens, num_beams=1)
        return self.tokenizer.batch_decode(output, skip_special_tokens=True)
