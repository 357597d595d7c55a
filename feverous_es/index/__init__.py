"""The index: what it holds and how it is built and read.

* :mod:`.elements`, :mod:`.element_ids`: the element model and the FEVEROUS id grammar, which
  every other part reads;
* :mod:`.dump`: reading a FEVEROUS dump into elements (with Papelo's linearization);
* :mod:`.store`: the store interface; :mod:`.backends` chooses one by name; :mod:`.embedded` and
  :mod:`.elastic` are the two stores; :mod:`.search` is element search over either;
* :mod:`.build`: the build and its planner.

The embedder the build runs is a model, loaded like every other through :mod:`feverous_es.runtime`.
"""
