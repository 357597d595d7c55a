"""The claim pipeline: one claim through the retrieval stages (:mod:`feverous_es.retrieve`) and
the verdict (:mod:`feverous_es.verdict`)."""
