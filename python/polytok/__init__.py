"""polytok: build, apply, certify and compare tokenisers."""
from polytok import corpus, errors
from polytok.counts import WordCounts, count
from polytok.errors import Error
from polytok.trainers import train

__version__ = "0.1.0"

__all__ = ["Error", "WordCounts", "__version__", "corpus", "count", "errors", "train"]
