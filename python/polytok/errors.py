"""The exception types polytok raises; every message names the input and what was expected."""


class Error(Exception):
    """Base class of every error polytok raises on bad input."""


class CorpusError(Error):
    """A corpus could not be read: missing file, no text, invalid UTF-8, bad record."""


class PatternError(Error):
    """An unknown pre-tokenisation preset or an invalid regex."""


class ConfigError(Error):
    """An option out of range, e.g. a vocabulary size too small for the bytes and specials.
    `field` names the value as a tokeniser file's field (`'merges'[5]`) where there is one, so
    a reader that passes the file's values on can say where in the file the value is."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class FormatError(Error):
    """A tokeniser file that is truncated, edited, or of a format or version we cannot read."""


class EncodeError(Error):
    """Text that cannot be encoded as asked, e.g. a disallowed special token in the input."""


class DecodeError(Error):
    """Ids that cannot be decoded, e.g. out of the vocabulary's range."""


class SolverError(Error):
    """An LP solver that is missing, failed, or returned no usable dual."""


class ClusterError(Error):
    """A Ray cluster that cannot be reached, or a task on it that failed however often it was retried."""
