"""The argument rules the public functions share, each written once with one message, so that
the same mistake reads the same wherever it is made: integers (never a bool), thread counts,
special-token lists, the corpus `errors=` modes, and the default pre-tokenisation pattern.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from numbers import Integral, Real
from typing import Any

from polytok.errors import ConfigError

# The pre-tokenisation preset every function that splits text uses unless told otherwise.
DEFAULT_PATTERN = "cl100k"
# How a corpus reader treats bytes that are not UTF-8: refuse them, replace them with U+FFFD,
# or keep them as they are.
ERROR_MODES = ("strict", "replace", "bytes")


def is_integer(value: Any) -> bool:
    """True for Python and numpy integers, False for bools, floats and the rest."""
    return isinstance(value, Integral) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    """True for finite real numbers (Python or numpy; an int too large for a float is not
    finite), False for bools and the rest."""
    if isinstance(value, bool) or not isinstance(value, Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def integer(name: str, value: Any, minimum: int = 1, maximum: int | None = None) -> int:
    """`value` as an int when it is an integer (not a bool) from `minimum` to `maximum`;
    otherwise the ConfigError that names `name`."""
    if not is_integer(value) or value < minimum or (maximum is not None and value > maximum):
        bound = f"from {minimum} to {maximum}" if maximum is not None else f"of at least {minimum}"
        raise ConfigError(f"{name} must be an integer {bound}, got {value!r}")
    return int(value)


def optional_integer(name: str, value: Any, minimum: int = 1) -> int | None:
    """`integer`, with None let through (the caller's default)."""
    return None if value is None else integer(name, value, minimum)


def num_threads(value: Any) -> int | None:
    """A thread count: an integer of at least 1, or None for every core."""
    if value is not None and (not is_integer(value) or value < 1):
        raise ConfigError(f"num_threads must be an integer of at least 1, or None (every core), got {value!r}")
    return None if value is None else int(value)


def special_tokens(tokens: Iterable[str] | None) -> list[str]:
    """The special tokens as a list of distinct non-empty strings (None: none)."""
    if tokens is None:
        return []
    if isinstance(tokens, (str, bytes)):
        raise ConfigError(f"special_tokens must be a list of strings, got the single string {tokens!r}")
    listed = list(tokens)
    for index, token in enumerate(listed):
        if not isinstance(token, str) or not token:
            raise ConfigError(f"special token {index} is {token!r}; each special token must be a non-empty string")
    repeated = sorted(token for token, times in Counter(listed).items() if times > 1)
    if repeated:
        raise ConfigError(f"special tokens must be distinct, {repeated} given more than once")
    return listed


def error_mode(errors: Any) -> str:
    """One of ERROR_MODES."""
    if errors not in ERROR_MODES:
        raise ConfigError(f"errors={errors!r}; expected one of {', '.join(ERROR_MODES)}")
    return errors


def number(name: str, value: Any) -> float:
    """`value` as a float when it is a finite real number (not a bool)."""
    if not is_number(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def probability(name: str, value: Any) -> float:
    """A probability: a number from 0 to 1."""
    value = number(name, value)
    if not 0 <= value <= 1:
        raise ConfigError(f"{name} must be a probability from 0 to 1, got {value!r}")
    return value


def sampling_alpha(value: Any) -> float:
    """The exponent of subword sampling: a number of at least 0 (0 draws every cut alike)."""
    value = number("alpha", value)
    if value < 0:
        raise ConfigError(f"alpha must be at least 0 (0 samples every segmentation alike), got {value!r}")
    return value


def seed(value: Any) -> int:
    """A random seed: an integer from 0 to 2**64 - 1."""
    return integer("seed", value, minimum=0, maximum=2**64 - 1)
