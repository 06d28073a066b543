"""Pre-tokenisation: special tokens split out first, then a regex preset or user regex.

Merges never cross a pre-token. Input may be any bytes: the regex runs on each valid UTF-8 run
and each run of invalid bytes is a pre-token of its own, so pre-tokenisation is lossless.
"""
from __future__ import annotations

from polytok import _core
from polytok.errors import PatternError

# The exact patterns of tiktoken's openai_public.py (gpt2 = r50k, cl100k, o200k) and of
# nanochat's tokenizer.py (GPT-4 style with numbers of at most two digits).
PRESETS: dict[str, str] = {
    "gpt2": r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s""",
    "cl100k": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    "o200k": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
    "nanochat": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}{1,2}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+""",
}


def resolve_pattern(pattern: str | None) -> str | None:
    """A preset name becomes its regex; any other string is taken as a user regex; None: no split."""
    if pattern is None:
        return None
    return PRESETS.get(pattern, pattern)


class PreTokenizer:
    """Splits documents into pre-tokens (bytes): special tokens first, then the regex."""

    def __init__(self, pattern: str | None = "cl100k", special_tokens: list[str] | None = None):
        self.pattern = resolve_pattern(pattern)
        self.special_tokens = list(special_tokens or [])
        try:
            self._core = _core.PreTokenizer(
                self.pattern, [s.encode("utf-8") for s in self.special_tokens]
            )
        except ValueError as error:
            raise PatternError(f"invalid pre-tokenisation regex {pattern!r}: {error}") from None

    def split(self, text: str | bytes) -> list[bytes]:
        """The pre-tokens of one document, special tokens included as whole pieces."""
        if isinstance(text, str):
            text = text.encode("utf-8", "surrogatepass")
        return self._core.split(text)
