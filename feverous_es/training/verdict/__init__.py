"""Training the entailment verdict: a 3-way cross-encoder over (claim, premise), and its export.

Driven by ``feverous-es train verdict``, every step resumable:

1. **Evidence.** Claims of files without ``gold_tables`` (FM2, FEVEROUS-S), and a seeded sample
   of ``retrieved`` claims of each table file, go through the pipeline's retrieval stages (pages,
   candidates, reranker, selector, next hops) over an index; the evidence it ends with, not the
   gold evidence, becomes their premise (Malon 2021, §5: a model trained on gold chains is
   confused by the evidence it is given at run time). Cached in ``<work>/evidence.jsonl``
   (:mod:`.evidence`).
2. **Pairs** (:mod:`.entailment_data`): those claims read as the verdict
   reads them, the same evidence without its gold elements as NOT ENOUGH INFO, every table
   claim against its gold table, and the nli pair files; each source capped at ``per_source``
   training pairs so none swamps the others. Cached in ``<work>/pairs.jsonl.gz`` (:mod:`.pairs`).
3. **Fine-tuning** (SUPPORTS / REFUTES / NOT ENOUGH INFO) of any local Hugging Face encoder
   (default all-MiniLM-L6-v2) on every training claim. Held-out accuracy per source is logged
   after every epoch (``training.json``'s ``epochs``). Checkpoints in ``<work>/full/``; a GPU
   (``--device cuda``) makes this minutes instead of hours (:mod:`.fit`).
4. **Export**: int8 ONNX (``model.int8.onnx``), parity against torch, held-out accuracy of the
   exported model per source and route (its scores in ``<work>/scores.jsonl``), and the model
   card (:mod:`.scoring`, :mod:`.card`).

:mod:`.command` runs the steps (``run``) or writes the GPU job's bundle instead; :mod:`.options`
holds the run's options and names its work directory's files.

torch, transformers and optimum are imported inside functions: the runtime never needs them.
"""
