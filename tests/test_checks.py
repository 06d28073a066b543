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
