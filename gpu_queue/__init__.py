"""The GPU queue: jobs prepared here, run in order on a lent GPU, taken back in here.

A maintainers' tool beside the package, as ``bench/`` is: it is shaped by how this project is
lent a GPU (15 minutes of device time, calls of 10 minutes, 64 MiB sent and returned per call),
not by anything a user of feverous-es runs, so the wheel does not carry it. Run it from the
repository root: ``python -m gpu_queue bundle …`` and ``python -m gpu_queue intake …``
(docs/gpu-training.md is the procedure). What the package's trainers take back from a lend
(``train verdict --from-gpu``, a fetched teacher) they read with
:mod:`feverous_es.training.gpu_results`.

:mod:`.jobs` builds each job's pairs (ranker, reader); :mod:`.bundle` writes them with the
bases they fine-tune (once each) and the runner; :mod:`.plan` estimates each job's seconds from
the measured rates and lays out the calls of a lend; :mod:`.job` is the runner, the one file
that runs on the GPU machine (with ``engine.py`` and ``spec.py`` beside it); :mod:`.rates` and
:mod:`.rates_job` measure the shipped graphs on CUDA for ``feverous-es plan --rates``;
:mod:`.intake` turns a student into an installable model. :mod:`.command` and ``__main__`` are
the two commands.
"""
