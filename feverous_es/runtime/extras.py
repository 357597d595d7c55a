"""How to ask for the optional ``export`` extra (torch, transformers, optimum): the model
loaders here name it when a model needs it, without importing :mod:`feverous_es.export`."""

INSTALL_HINT = "pip install torch==2.13.0, then pip install 'feverous-es[export]'"
# Exit status of `python -m feverous_es.export.embedder` when the export extra is missing.
MISSING_EXTRA_EXIT = 3
