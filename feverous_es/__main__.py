"""``python -m feverous_es``: the ``feverous-es`` command."""

from feverous_es.cli import main

main()
