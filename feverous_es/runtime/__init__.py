"""Where every model is loaded and run, without torch: ONNX Runtime sessions (:mod:`.session`),
one ONNX model with its tokenizer and manifest check (:mod:`.model`), and the wrappers the
pipeline uses: :mod:`.embedder` (feature extraction), :mod:`.cross_encoder` (text
classification: rankers and the entailment reader), :mod:`.seq2seq` (text-to-text generation,
the hop stage's model). :mod:`.tasks` reads the task a model directory was made for (each
wrapper refuses a model of another task) and :mod:`.load` maps each task to its wrapper.
:mod:`.fetch` installs the downloaded reranker from its pinned PyPI wheel; :mod:`.files` names
every model file; :mod:`.costs` counts what each model run reads.

Nothing here imports from the stages above it (index, retrieval, rerank, verdict, export).
"""
