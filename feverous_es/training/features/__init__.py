"""Training the table feature verdict: claim-against-table features, gradient boosting, ONNX.

Driven by ``feverous-es train table-verdict``:

1. **Features.** Each claim (a FEVEROUS-format file whose records name
   ``gold_tables``, as TabFact's do) is read against its gold table, taken from the index's
   store with the :meth:`~feverous_es.verdict.table_facts.Table.from_elements` the verdict uses
   at run time: the cheap stand-in for the retrieved table (the pipeline costs ~0.5 s a claim, 4
   hours for 30 k claims). With ``retrieved`` = N, the first N training claims (file order) also
   go through the pipeline's retrieval (cached in ``<work>/evidence.jsonl``, as ``train
   verdict`` does) and are read a second time against the table the verdict would read in their
   evidence (:func:`~feverous_es.verdict.feature_model.first_table`).
2. **Fitting** a scikit-learn ``GradientBoostingClassifier`` (SUPPORTS / REFUTES; seconds on a
   CPU). ``--claims`` files are split by the seeded hash of each claim id, a share ``holdout``
   kept out; ``--train-claims`` files (e.g. TabFact's training claims) are never held out.
3. **Export** with skl2onnx to ``model.onnx`` (tree-ensemble operators that ONNX Runtime runs:
   no scikit-learn at run time), a parity check against scikit-learn, the held-out accuracy per
   file, ``feature_model.json`` (kind, labels, features) and a model card.

scikit-learn and skl2onnx are imported inside functions: only training needs them.
"""
