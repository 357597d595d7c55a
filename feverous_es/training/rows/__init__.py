"""Fine-tuning the row model of the candidate stage's table ranking, and its ONNX export.

The ``papelo`` candidate stage ranks the tables of the whole index, then re-ranks its first
``row_tables`` by adding ``row_weight`` x a cross-encoder's logit for (claim, the table's best
row as plain text) (:func:`feverous_es.retrieve.candidates.rerank_by_rows`). This module trains
that cross-encoder on claims that name their table (``gold_tables``, as TabFact's do):

1. **Row groups.** Each claim's tables are scored as the stage scores them, before the row step
   (``PapeloCandidates.table_scores``); the group is the gold table's best row, then the best
   rows of the first ``negatives`` other tables (*hard negatives*), then ``others`` gold rows
   of other claims, drawn with the seed. A claim whose gold table is not in the pool makes no
   group. Cached in ``<work>/row-groups.jsonl``, one line a claim.
2. **Fine-tuning and export** as for the evidence rankers
   (:func:`feverous_es.training.rerank.fit.train`: cross entropy over the group), into
   ``<out>/rows``.
"""
