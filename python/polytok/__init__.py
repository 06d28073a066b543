"""polytok: build, apply, certify and compare tokenisers."""
from polytok.compare import compare
from polytok.errors import Error
from polytok.metrics import corpus_stats, evaluate

__version__ = "0.1.0"

__all__ = ["Error", "__version__", "compare", "corpus_stats", "evaluate"]
