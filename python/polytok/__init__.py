"""polytok: build, apply, certify and compare tokenisers."""
from polytok.certify import Certificate, certify
from polytok.errors import Error

__all__ = ["Certificate", "Error", "certify"]
