"""polytok: build, apply, certify and compare tokenisers."""
from polytok.errors import Error

__all__ = ["Error"]
