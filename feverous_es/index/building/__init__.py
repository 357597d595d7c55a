"""Building an index: the build itself (:mod:`.builder`: dump rows -> elements -> embeddings ->
store), and what a build will cost, said before it starts (:mod:`.plan`, :mod:`.plan_report`)."""
