"""The rerank trainer: a cross-encoder ranker fine-tuned on claims' gold evidence against retrieved
hard negatives (data, fit, card; `feverous-es train rerank`)."""
