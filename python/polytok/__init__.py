"""polytok: build, apply, certify and compare tokenisers."""
from polytok.errors import Error
from polytok.trainers import train

__all__ = ["Error", "train"]
