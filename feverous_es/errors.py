"""Every error feverous-es raises on purpose, under one root.

Catch :class:`FeverousError` to handle them all. Each message is one line a user can act on (the
command line prints it as ``error: ...`` and exits 1); anything else escaping is a bug. The
subclasses are the failures a caller may want to tell apart.
"""

from __future__ import annotations


class FeverousError(Exception):
    """Root of the errors feverous-es raises on purpose; the message is one line for people."""


class ConfigError(FeverousError, ValueError):
    """An option or setting outside what it accepts (a device name, a batch size, a length)."""


class FormatError(FeverousError, ValueError):
    """An element id, evidence triple or label that is not FEVEROUS's."""


class WikiError(FeverousError):
    """A dump that cannot be read."""


class MalformedPage(FeverousError, ValueError):
    """A page whose JSON does not have the FEVEROUS layout (the build skips it and counts it)."""


class StoreError(FeverousError):
    """A store that cannot be opened, written or searched."""


class StoreUnreachable(StoreError):
    """The store's server cannot be reached: refused, timed out, or failed TLS."""


class StoreUnauthorized(StoreError):
    """The server refused the credentials, or they lack a permission the call needs."""


class IncompatibleIndex(StoreError):
    """The index exists but this program cannot use it (another format, version, dimension or
    mapping); the message says whether to rebuild or start a new build."""


class IndexChanged(StoreError):
    """The index's files were removed, replaced or truncated under a running reader."""


class ModelError(FeverousError):
    """Model files that are missing, corrupt, or cannot be installed or loaded here."""


class PluginError(FeverousError):
    """An unknown stage or plugin name, or a plugin that failed to load."""


class BadTextError(FeverousError, ValueError):
    """A claim, query or source that cannot be read (:mod:`feverous_es.input_text`)."""


class EmptyClaimError(BadTextError):
    """A claim with no text."""


class PlanError(FeverousError):
    """Build rates that cannot be read or used."""


class ScoreError(FeverousError, ValueError):
    """A gold or prediction file that cannot be scored."""


class TrainError(FeverousError):
    """A training run that cannot go on as asked (missing data, a bad checkpoint, no torch)."""


class ExportError(FeverousError):
    """A model that cannot be exported to ONNX: not a model, the export extra missing, a failed
    export, or graphs that drift from torch."""


class WorkAbandoned(FeverousError):
    """The pipeline stopped between two stages because nobody waits for the answer any more
    (:attr:`Pipeline.stop_when`)."""
