"""Pre-tokenisation: special tokens split out first, then a regex preset or user regex.

Merges never cross a pre-token. Input may be any bytes: the regex runs on each valid UTF-8 run
and each run of invalid bytes is a pre-token of its own, so pre-tokenisation is always lossless.
The pieces are exactly those of Python's `regex.findall(pattern, text)` on each run (whole
matches; empty matches are dropped). The presets match every character; text a user regex does
not match becomes a pre-token of its own (as HF's Split "isolated" does), never dropped.

The four presets run on hand-written linear-time matchers in the Rust core; their character
tables are generated from the `regex` module itself (tools/gen_unicode_tables.py), so they see
the same Unicode version. Any other regex runs on fancy-regex (lookaround, possessive
quantifiers, atomic groups, `\\p{..}`), whose Unicode tables may be older than `regex`'s.

Pattern rule: a preset name selects its regex; a bare word of letters, digits and underscores
that is not a preset name (e.g. "cl100K", "gpt4") is rejected as an unknown preset rather than
taken as a literal-word regex; anything else is a user regex; None means no split.
"""
from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np

from polytok import _core, checks
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

# A bare word like this is a misspelt preset name, not a regex anyone would split text with.
_PRESET_LIKE = re.compile(r"[A-Za-z0-9_]+")


def resolve_pattern(pattern: str | None) -> str | None:
    """The regex for `pattern`: a preset name becomes its regex, another string is a user regex,
    None stays None (no split). Raises PatternError for an unknown preset-like name."""
    if pattern is None:
        return None
    if not isinstance(pattern, str):
        raise PatternError(
            f"pre-tokenisation pattern must be a preset name, a regex string or None, "
            f"not {type(pattern).__name__}"
        )
    if pattern in PRESETS:
        return PRESETS[pattern]
    if pattern == "":
        raise PatternError(
            "empty pre-tokenisation pattern: it matches nothing but empty strings; "
            "use None for no split"
        )
    if _PRESET_LIKE.fullmatch(pattern):
        raise PatternError(
            f"unknown preset {pattern!r}: expected one of {', '.join(PRESETS)}, "
            f"or a regex (write (?:{pattern}) to split on that literal word)"
        )
    return pattern


class PreTokenizer:
    """Splits documents into pre-tokens (bytes): special tokens first, then the regex."""

    def __init__(
        self, pattern: str | None = checks.DEFAULT_PATTERN, special_tokens: Iterable[str] | None = None
    ) -> None:
        self.pattern = resolve_pattern(pattern)
        self.special_tokens = checks.special_tokens(special_tokens)
        encoded = [token.encode("utf-8") for token in self.special_tokens]
        try:
            self._core = _core.PreTokenizer(self.pattern, encoded, False)
        except ValueError as error:
            raise PatternError(f"invalid pre-tokenisation regex {pattern!r}: {error}") from None

    @property
    def preset(self) -> str | None:
        """The preset whose fast matcher splits the text, or None (user regex or no split)."""
        return self._core.preset

    def split(self, text: str | bytes) -> list[bytes]:
        """The pre-tokens of one document, special tokens included as whole pieces."""
        try:
            return self._core.split(_as_bytes(text))
        except ValueError as error:
            raise PatternError(f"pre-tokenisation regex {self.pattern!r} failed: {error}") from None

    def piece_lengths(self, text: str | bytes) -> np.ndarray:
        """The byte lengths (int64) of the pre-tokens of `text`, without creating them."""
        try:
            return self._core.piece_lengths(_as_bytes(text))
        except ValueError as error:
            raise PatternError(f"pre-tokenisation regex {self.pattern!r} failed: {error}") from None

    def __repr__(self) -> str:
        name = self.preset or ("None" if self.pattern is None else repr(self.pattern))
        return f"PreTokenizer({name}, special_tokens={self.special_tokens!r})"


def _as_bytes(text: str | bytes) -> bytes:
    # surrogatepass keeps lone surrogates as (invalid UTF-8) bytes instead of failing.
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
