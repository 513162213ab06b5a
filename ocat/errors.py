"""Expected failures, each carrying the exit code the CLI reports for it."""

from __future__ import annotations


class OcatError(Exception):
    """A failure ocat expects and reports without a traceback."""

    exit_code = 1


class UsageError(OcatError):
    """The command line itself is wrong (exit 2)."""

    exit_code = 2


class ConfigError(OcatError):
    """A configuration file, environment variable or flag value is invalid (exit 3)."""

    exit_code = 3


class StoreError(OcatError):
    """The memory store could not be opened, read or written (exit 1)."""


class NotFound(OcatError):
    """An id names no memory (exit 1: the command line was right, the store has no such thing)."""


class EmbeddingError(OcatError):
    """The embedding model could not be loaded or run (exit 1)."""


class InputFileError(OcatError):
    """An input file is missing, unreadable or malformed (exit 1)."""


class ProviderError(OcatError):
    """The LLM provider failed: auth, rate limit, timeout, connection, unknown model (exit 1)."""


class Cancelled(OcatError):
    """The user stopped a long command; what it stored stays, and running it again completes it (exit 130)."""

    exit_code = 130
