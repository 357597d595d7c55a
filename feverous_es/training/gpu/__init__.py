"""The GPU queue: jobs prepared here, run in order on a lent GPU, taken back in here.

:mod:`.jobs` builds each job's pairs (ranker, reader, table); :mod:`.bundle` writes them with
the bases they fine-tune (once each) and the runner; :mod:`.plan` estimates each job's seconds
from the measured rates and lays out the calls of a lend; :mod:`.job` is the runner, the one
file that runs on the GPU machine (self-contained); :mod:`.results` reads what came back, and
:mod:`.intake` turns a student into an installable model. :mod:`.command` and :mod:`.cli` are
``feverous-es gpu bundle`` and ``gpu intake``. docs/gpu-training.md is the procedure.
"""
