"""``feverous-es serve``: the verifier over HTTP (a JSON API and a page for people).

:mod:`~feverous_es.serve.worker` owns the pipeline on one thread and batches the claims that
queue for it; :mod:`~feverous_es.serve.app` is the ASGI application (FastAPI) with its routes,
request limits and token check; ``static/`` holds the page, served by the app (no CDN).
"""
