"""polytok: build, apply, certify and compare tokenisers."""
from polytok import corpus, errors
from polytok.certify import Certificate, certify
from polytok.compare import compare
from polytok.corpus import texts
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.counts import word_counts_alias as _word_counts_alias
from polytok.errors import Error
from polytok.formats import load
from polytok.formats.huggingface import load_huggingface
from polytok.formats.sentencepiece import load_sentencepiece
from polytok.formats.tiktoken import load_tiktoken
from polytok.metrics import corpus_stats, evaluate
from polytok.tokenizer import Tokenizer
from polytok.trainers import train
from polytok.trainers.extend import extend
from polytok.version import __version__

__all__ = [
    "Certificate",
    "Error",
    "PreTokenCounts",
    "Tokenizer",
    "__version__",
    "certify",
    "compare",
    "corpus",
    "corpus_stats",
    "count",
    "errors",
    "evaluate",
    "extend",
    "load",
    "load_huggingface",
    "load_sentencepiece",
    "load_tiktoken",
    "texts",
    "train",
]


def __getattr__(name: str) -> type[PreTokenCounts]:
    """`polytok.WordCounts`: the deprecated name of `PreTokenCounts`, with a warning."""
    if name == "WordCounts":
        return _word_counts_alias()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
