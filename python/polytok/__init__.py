"""polytok: build, apply, certify and compare tokenisers."""
from polytok.errors import Error
from polytok.formats import load
from polytok.formats.tiktoken import load_tiktoken
from polytok.tokenizer import Tokenizer

__all__ = ["Error", "Tokenizer", "load", "load_tiktoken"]
