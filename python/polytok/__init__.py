"""polytok: build, apply, certify and compare tokenisers."""
from polytok.errors import Error
from polytok.counts import WordCounts
from polytok.counts import count

__all__ = ["Error"]
