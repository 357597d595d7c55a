"""The verdict stage: the premise a claim is read against, the computed table and sentence
facts, the feature models and the ``classifier`` verdict that combines them with entailment."""
