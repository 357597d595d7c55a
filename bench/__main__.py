"""``python -m bench``: the benchmark driver (bench/run.py)."""

import sys

from bench.run import main

sys.exit(main())
