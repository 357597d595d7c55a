"""Reading a FEVEROUS dump: the SQLite file (:mod:`.wiki`), one page's JSON into typed elements
(:mod:`.page`), and Papelo's text forms of them (:mod:`.linearize`)."""
