"""The shared argument rules of polytok.checks: what each accepts, refuses, and how it says so."""
from __future__ import annotations

import numpy as np
import pytest

from polytok import checks
from polytok.errors import ConfigError


def test_integers_are_python_or_numpy_integers_never_bools():
    assert checks.integer("n", np.int64(3)) == 3 and type(checks.integer("n", np.uint8(3))) is int
    assert checks.integer("n", 0, 0) == 0 and checks.integer("n", 5, 1, 5) == 5
    for value in (True, 2.0, "2", None, 0):
        with pytest.raises(ConfigError, match=rf"^n must be an integer of at least 1, got {value!r}$"):
            checks.integer("n", value)
    with pytest.raises(ConfigError, match="^n must be an integer from 1 to 5, got 6$"):
        checks.integer("n", 6, 1, 5)
    assert checks.optional_integer("n", None) is None


def test_thread_counts():
    assert checks.num_threads(None) is None and checks.num_threads(np.int32(2)) == 2
    for value in (0, True, 1.5, "2"):
        with pytest.raises(ConfigError, match=r"num_threads must be an integer of at least 1, or None \(every core\)"):
            checks.num_threads(value)


def test_special_tokens():
    assert checks.special_tokens(None) == [] and checks.special_tokens(("<a>", "<b>")) == ["<a>", "<b>"]
    with pytest.raises(ConfigError, match="single string '<a>'"):
        checks.special_tokens("<a>")
    with pytest.raises(ConfigError, match=r"special token 1 is ''; each special token must be a non-empty string"):
        checks.special_tokens(["<a>", ""])
    with pytest.raises(ConfigError, match=r"\['<a>'\] given more than once"):
        checks.special_tokens(["<a>", "<b>", "<a>"])


def test_error_modes():
    assert [checks.error_mode(mode) for mode in checks.ERROR_MODES] == ["strict", "replace", "bytes"]
    with pytest.raises(ConfigError, match="errors='ignore'; expected one of strict, replace, bytes"):
        checks.error_mode("ignore")


def test_numbers_probabilities_alphas_and_seeds():
    assert checks.number("x", np.float32(0.5)) == 0.5 and checks.number("x", 2) == 2.0
    for value in (True, float("nan"), float("inf"), "1", None):
        with pytest.raises(ConfigError, match=rf"^x must be a finite number, got {value!r}$"):
            checks.number("x", value)
    assert checks.probability("dropout", 0) == 0.0 and checks.probability("dropout", 1) == 1.0
    for value in (-0.01, 1.5):
        with pytest.raises(ConfigError, match=r"^dropout must be a probability from 0 to 1"):
            checks.probability("dropout", value)
    assert checks.sampling_alpha(0) == 0.0
    with pytest.raises(ConfigError, match=r"^alpha must be at least 0"):
        checks.sampling_alpha(-1)
    assert checks.seed(0) == 0 and checks.seed(2**64 - 1) == 2**64 - 1
    for value in (-1, 2**64, True, 1.0):
        with pytest.raises(ConfigError, match=r"^seed must be an integer from 0 to 18446744073709551615"):
            checks.seed(value)
