"""polytok's version, in a module of its own so that any module (a Ray worker's check, the
CLI) can read it without importing the package's public API."""

__version__ = "0.1.0"
