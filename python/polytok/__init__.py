"""polytok: build, apply, certify and compare tokenisers."""
from polytok.errors import Error
from polytok.counts import WordCounts
from polytok.counts import count

__version__ = "0.1.0"

__all__ = ["Error", "__version__"]
