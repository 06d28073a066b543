"""Hugging Face `tokenizer.json`: reading BPE, WordPiece and Unigram files with their own
pipelines (read.py, with one module per pipeline stage), and writing polytok's tokenisers so
that `tokenizers` encodes to the same ids (write.py)."""
from polytok.formats.huggingface.read import load_huggingface, tokenizer_from_huggingface
from polytok.formats.huggingface.write import save_huggingface

__all__ = ["load_huggingface", "save_huggingface", "tokenizer_from_huggingface"]
