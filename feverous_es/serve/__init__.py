"""``feverous-es serve``: the verifier over HTTP (a JSON API and a page for people).

:mod:`~feverous_es.serve.worker` owns the pipeline on one thread and batches the claims that
queue for it; :mod:`~feverous_es.serve.app` makes the ASGI application (FastAPI): its routes
(:mod:`~feverous_es.serve.routes`: the API behind the token, the probes), request bodies and
their limits (:mod:`~feverous_es.serve.bodies`), error answers (:mod:`~feverous_es.serve.errors`),
middleware, health details and evidence scores, each a module; ``static/`` holds the page,
served by the app (no CDN).
"""
