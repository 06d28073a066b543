"""Hugging Face `tokenizer.json`: reading BPE, WordPiece and Unigram files with their own
normalisers, pre-tokenisers, decoders and added tokens (ids and decoding identical to
`tokenizers`), and writing polytok's byte-level BPE, WordPiece and Unigram so that
`tokenizers.Tokenizer.from_file` encodes to the same ids and `polytok.load` reads them back as
native tokenisers.

The written pipeline: a Split pre-tokeniser with polytok's regex (matches kept as pieces), ByteLevel
(bytes -> printable characters, GPT-2's table; no regex, no prefix space), the model, the special
tokens as added tokens, and a ByteLevel decoder.
- BPE: the merge list; HF's BPE replays the merges in order, as polytok's merges segmenter does.
- WordPiece: greedy longest match on both sides. Continuation tokens are spelled " " + marker +
  byte-level text (see CONTINUATION_TAG); the decoder first replaces that prefix away, so HF's
  decode gives the text back. Without a marker the prefix is empty. HF's WordPiece tries every
  end of every word, which is quadratic in a pre-token's length: with `pattern=None` the whole
  text is one pre-token, and HF becomes slow on long texts (the ids are still polytok's).
- Unigram: [piece, score] in id order, no unknown token (every byte is a piece); HF's Viterbi
  keeps the path whose last token starts earliest on a tie, as polytok does. The scores are spelled
  so that HF's float parser reads them exactly (score_text).
ConvexTok's shortest-path segmenter has no HF model and is refused.
"""
from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Iterable
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import regex

from polytok import _core
from polytok.errors import ConfigError, EncodeError, FormatError, PatternError
from polytok.formats import normalizers
from polytok.formats.normalizers import Normalizer
from polytok.tokenizer import Tokenizer, register_segmenter


# The regex HF's ByteLevel pre-tokeniser applies when `use_regex` is true (GPT-2's, as HF writes it).
HF_BYTE_LEVEL_REGEX = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


@lru_cache(maxsize=1)
def byte_to_char() -> tuple[str, ...]:
    """GPT-2's byte -> character table: printable Latin-1 bytes stand for themselves, the other
    bytes take the characters from U+0100 on, in byte order."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    table: dict[int, str] = {byte: chr(byte) for byte in printable}
    extra = 0
    for byte in range(256):
        if byte not in table:
            table[byte] = chr(256 + extra)
            extra += 1
    return tuple(table[byte] for byte in range(256))


def to_byte_level(token: bytes) -> str:
    """A token's bytes as HF byte-level text."""
    table = byte_to_char()
    return "".join(table[byte] for byte in token)


def from_byte_level(text: str) -> bytes:
    """HF byte-level text back to bytes; KeyError for a character outside the table."""
    inverse = {char: byte for byte, char in enumerate(byte_to_char())}
    return bytes(inverse[char] for char in text)


def save_huggingface(tokenizer: Tokenizer, path: str | Path) -> None:
    """Writes `tokenizer` as a HF tokenizer.json (byte-level BPE, WordPiece or Unigram; see the
    module docstring); ConfigError for what HF cannot reproduce, and nothing is written then."""
    from polytok.formats import write_atomically

    # a loaded HF file is written back as it was read, which keeps every id
    pipeline = getattr(tokenizer, "pipeline", None)
    if pipeline is not None and pipeline.kind == "HF tokenizer.json":
        record = pipeline.record
        text = json.dumps(record, ensure_ascii=False, indent=2)
    else:
        record = huggingface_record(tokenizer)
        if record["model"]["type"] == "Unigram":
            # the scores are written in digits that `tokenizers` reads back exactly
            vocab = record["model"]["vocab"]
            record["model"]["vocab"] = _VOCAB_PLACEHOLDER
            before, placeholder, after = json.dumps(record, ensure_ascii=False, indent=2).rpartition(json.dumps(_VOCAB_PLACEHOLDER))
            entries = ",\n".join(f"      [{json.dumps(piece, ensure_ascii=False)}, {score_text(score)}]" for piece, score in vocab)
            text = before + "[\n" + entries + "\n    ]" + after
        else:
            text = json.dumps(record, ensure_ascii=False, indent=2)
    write_atomically(path, (text + "\n").encode("utf-8"))


_VOCAB_PLACEHOLDER = "polytok: the Unigram vocabulary goes here"


def score_text(score: float) -> str:
    """A JSON number that both Python and `tokenizers` read as exactly `score`. `tokenizers`'
    parser can be one unit in the last place off on the shortest digits (see
    as_tokenizers_reads_it), so longer spellings and integer-significand forms are tried; where
    none is found by that model of the parser (about one score in 400), the shortest digits stay."""
    candidates = [repr(score)] + [f"{score:.{digits}g}" for digits in range(17, 22)]
    if math.isfinite(score) and score != 0.0:
        exact = Decimal(score)
        for exponent in range(15, 20):
            centre = int((abs(exact) * 10**exponent).to_integral_value())
            sign = "-" if score < 0 else ""
            candidates += [f"{sign}{centre + delta}e-{exponent}" for delta in range(-20, 21) if 0 < centre + delta < 2**64]
    for candidate in candidates:
        if float(candidate) == score and tokenizers_float(candidate, math.nan) == score:
            return candidate
    return repr(score)


# ConvexTok's optimal segmentation has no HF model; WordPiece and Unigram map onto HF's own.
_HF_MODELS = {"merges": "BPE", "longest_match": "WordPiece", "viterbi": "Unigram"}

# Prepended to the continuation marker in HF's WordPiece vocabulary. HF looks a word's first
# piece up among all spellings, continuation ones included, so with a plain "##" a word such as
# "###" would start with the continuation token "##" + "#" where polytok takes a word-initial
# token. A space is not in the byte-level alphabet (it is written "Ġ"), so no word starts with it.
CONTINUATION_TAG = " "

# HF's WordPiece makes a word longer than this many characters (bytes here) one unknown token;
# polytok has no such limit, so it is set beyond any text.
MAX_WORD_CHARACTERS = 2**63 - 1


def huggingface_record(tokenizer: Tokenizer) -> dict[str, Any]:
    """The tokenizer.json content as a dict; ConfigError when HF cannot reproduce the ids."""
    if tokenizer.segmenter == "shortest_path":
        raise ConfigError(
            "HF tokenizers has no shortest-path model: a ConvexTok tokeniser (segmenter 'shortest_path') "
            "cannot be written as tokenizer.json; save it with Tokenizer.save instead"
        )
    if tokenizer.segmenter not in _HF_MODELS:
        raise ConfigError(
            f"HF tokenizers has no model for the segmenter {tokenizer.segmenter!r}; tokenizer.json can hold "
            f"BPE ('merges'), WordPiece ('longest_match') and Unigram ('viterbi') tokenisers"
        )
    vocab = tokenizer.vocab
    ids: dict[bytes, int] = {}
    for token_id, token in enumerate(vocab):
        if token in ids:
            raise ConfigError(f"tokens {ids[token]} and {token_id} are both {token!r}; HF's vocabulary needs distinct tokens")
        ids[token] = token_id
    missing = [byte for byte in range(256) if bytes([byte]) not in ids]
    if missing:
        raise ConfigError(f"byte 0x{missing[0]:02x} is not a token; HF byte-level models need all 256 bytes")
    pattern = None if tokenizer.pattern is None else to_oniguruma(tokenizer.pattern)
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if pattern is None:
        pre_tokenizer: dict[str, Any] = byte_level
    else:
        split = {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    added_tokens = [
        {"id": token_id, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for text, token_id in sorted(tokenizer.special_tokens.items(), key=lambda item: item[1])
    ]
    decoder: dict[str, Any] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if tokenizer.segmenter == "merges":
        model = _bpe_model(tokenizer)
    elif tokenizer.segmenter == "longest_match":
        model = _wordpiece_model(tokenizer, ids)
        if tokenizer.continuation_marker:
            # the tag and marker go before the bytes become text again
            strip = {"type": "Replace", "pattern": {"String": model["continuing_subword_prefix"]}, "content": ""}
            decoder = {"type": "Sequence", "decoders": [strip, decoder]}
    else:
        model = _unigram_model(tokenizer)
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": decoder,
        "model": model,
    }


def _bpe_model(tokenizer: Tokenizer) -> dict[str, Any]:
    """HF's BPE replays the merges in order, which is what polytok's merges segmenter does."""
    vocab = tokenizer.vocab
    pairs = tokenizer.merges if tokenizer.merges is not None else merges_from_ranks(vocab)
    return {
        "type": "BPE",
        "dropout": None,
        "unk_token": None,
        "continuing_subword_prefix": None,
        "end_of_word_suffix": None,
        "fuse_unk": False,
        "byte_fallback": False,
        "ignore_merges": False,
        "vocab": {to_byte_level(token): token_id for token_id, token in enumerate(vocab)},
        "merges": [f"{to_byte_level(vocab[left])} {to_byte_level(vocab[right])}" for left, right in pairs],
    }


def _wordpiece_model(tokenizer: Tokenizer, ids: dict[bytes, int]) -> dict[str, Any]:
    """HF's WordPiece takes the longest vocabulary match at each position, as polytok's
    longest_match does. Continuation tokens are spelled CONTINUATION_TAG + marker + byte-level
    text; without a marker the prefix is empty, so every token fits anywhere (polytok's rule)."""
    marker = tokenizer.continuation_marker
    if marker:
        encoded_marker = marker.encode("utf-8")
        missing = [byte for byte in range(256) if encoded_marker + bytes([byte]) not in ids]
        if missing:
            raise ConfigError(f"continuation byte 0x{missing[0]:02x} is not a token; every byte must continue a word")
        prefix = CONTINUATION_TAG + marker
    else:
        encoded_marker, prefix = b"", ""

    def spelling(token: bytes) -> str:
        if marker and len(token) > len(encoded_marker) and token.startswith(encoded_marker):
            return prefix + to_byte_level(token[len(encoded_marker):])
        return to_byte_level(token)

    return {
        "type": "WordPiece",
        # every byte is a token in both roles, so no word is ever unknown; the token only has to exist
        "unk_token": to_byte_level(tokenizer.vocab[0]),
        "continuing_subword_prefix": prefix,
        "max_input_chars_per_word": MAX_WORD_CHARACTERS,
        "vocab": {spelling(token): token_id for token_id, token in enumerate(tokenizer.vocab)},
    }


def _unigram_model(tokenizer: Tokenizer) -> dict[str, Any]:
    """HF's Unigram runs Viterbi over the scores and, like polytok, keeps the path whose last
    token starts earliest on a tie."""
    scores = tokenizer.scores
    if scores is None or len(scores) != len(tokenizer.vocab):
        raise ConfigError("a Unigram tokeniser needs one score per token to be written as tokenizer.json")
    return {
        "type": "Unigram",
        "unk_id": None,
        "byte_fallback": False,
        "vocab": [[to_byte_level(token), float(score)] for token, score in zip(tokenizer.vocab, scores)],
    }


def to_oniguruma(pattern: str) -> str:
    """The pattern for HF's regex engine, Oniguruma with Ruby syntax, where `X{m,n}+` means
    `(?:X{m,n})+`, not the possessive `X{m,n}` of Python's `regex` and tiktoken: such
    quantifiers become atomic groups `(?>X{m,n})`, which is what possessive means. When
    `tokenizers` is installed the result is compiled, so an unsupported construct fails here."""
    converted = _atomic_counted_quantifiers(pattern)
    try:
        import tokenizers
    except ImportError:
        return converted
    try:
        tokenizers.Regex(converted)
    except Exception as error:  # tokenizers raises a plain Exception for a bad regex
        raise ConfigError(f"HF tokenizers' regex engine (Oniguruma) rejects the pattern {pattern!r}: {error}") from None
    return converted


def _atomic_counted_quantifiers(pattern: str) -> str:
    """Rewrites each possessive counted quantifier `X{m,n}+` as `(?>X{m,n})`, scanning atoms
    (escapes, classes, groups, characters) so X is known."""
    out: list[str] = []
    group_starts: list[int] = []  # positions in `out` where open groups begin
    last_atom = 0  # position in `out` where the last complete atom begins
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            end = i + 2
            if pattern[i + 1 : i + 2] in ("p", "P") and pattern[end : end + 1] == "{":
                end = pattern.index("}", end) + 1
            last_atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "[":
            end = _class_end(pattern, i)
            last_atom = len(out)
            out.append(pattern[i:end])
            i = end
        elif char == "(":
            group_starts.append(len(out))
            out.append(char)
            i += 1
        elif char == ")":
            last_atom = group_starts.pop()
            out.append(char)
            i += 1
        elif char == "{" and (end := _counted_quantifier_end(pattern, i)):
            if pattern[end : end + 1] == "+":
                out[last_atom:] = ["(?>" + "".join(out[last_atom:]) + pattern[i:end] + ")"]
                i = end + 1
            else:
                out.append(pattern[i:end])
                i = end
        else:
            if char not in "|*+?":
                last_atom = len(out)
            out.append(char)
            i += 1
    return "".join(out)


def _class_end(pattern: str, start: int) -> int:
    """The index just past the character class that opens at `start` (nested classes allowed)."""
    depth, i = 0, start
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[":
            depth += 1
            if pattern[i + 1 : i + 2] == "^":
                i += 1
            if pattern[i + 1 : i + 2] == "]":  # a leading ] is a literal
                i += 1
        elif pattern[i] == "]":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return len(pattern)


def _counted_quantifier_end(pattern: str, start: int) -> int | None:
    """The index just past `{m}`, `{m,}` or `{m,n}` at `start`, or None if it is not one."""
    close = pattern.find("}", start)
    body = pattern[start + 1 : close] if close > 0 else ""
    numbers = body.split(",")
    if close > 0 and len(numbers) <= 2 and numbers[0].isdigit() and all(n.isdigit() or n == "" for n in numbers[1:]):
        return close + 1
    return None


def merges_from_ranks(vocab: list[bytes]) -> list[tuple[int, int]]:
    """The merge list of a vocabulary without one (tiktoken ranks, rank = id): each token of two
    or more bytes is the join of the two parts that tiktoken's rule, using only lower ranks,
    leaves of its bytes. The merges come out in rank order."""
    rank = {token: token_id for token_id, token in enumerate(vocab)}
    merges = []
    for token_id, token in enumerate(vocab):
        if len(token) < 2:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best = None
            for i in range(len(parts) - 1):
                joined_rank = rank.get(parts[i] + parts[i + 1])
                if joined_rank is not None and joined_rank < token_id and (best is None or joined_rank < best[0]):
                    best = (joined_rank, i)
            if best is None:
                break
            i = best[1]
            parts[i : i + 2] = [parts[i] + parts[i + 1]]
        if len(parts) != 2 or parts[0] not in rank or parts[1] not in rank:
            raise ConfigError(f"token {token_id} ({token!r}) is not the join of two lower-ranked tokens; no BPE merge list gives it")
        merges.append((rank[parts[0]], rank[parts[1]]))
    return merges


# ---- reading --------------------------------------------------------------------------------
#
# A loaded file keeps its own pipeline: added tokens are cut out first (those marked
# `normalized: false` from the raw text, the others from the normalised text), the rest is
# normalised and pre-tokenised here in Python, and the words go to a Rust segmenter in one call.
# A byte-level BPE file without normaliser whose pre-tokeniser is one regex is the fast path: the
# regex runs in the core (polytok's own pre-tokeniser) and the merges segmenter is polytok's.

Split = tuple[str, bool]  # a piece of text, and whether it starts the input (Metaspace's "first")
PreTokenizerStep = Callable[[list[Split]], list[Split]]
Decoder = Callable[[list[str]], list[str]]

# Python `regex` classes for the Rust predicates HF's components use.
_WHITE_SPACE = r"\p{White_Space}"
_WORD = r"\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\p{Join_Control}"
_BERT_PUNCTUATION = r"\p{P}!-/:-@\[-`{-~"


class LoadedPipeline:
    """A loaded file's text pipeline around polytok's segmenter, and its decoder.

    `segmenter_arguments` are the keyword arguments of the `_core.Encoder` constructor named by
    the Tokenizer's segmenter; `token_texts[i]` is token i as the file writes it (what decoders see).
    """

    def __init__(
        self,
        *,
        kind: str,
        record: Any,
        added: list[dict[str, Any]],
        normalizer: Normalizer | None,
        pre_tokenizer: list[PreTokenizerStep] | None,
        decoder: Decoder | None,
        token_texts: list[str],
        segmenter_arguments: dict[str, Any],
        lossy: list[str],
        components: dict[str, Any],
    ):
        self.kind = kind
        self.record = record
        self.added = added
        self.normalizer = normalizer
        self.pre_tokenizer = pre_tokenizer
        self.decoder = decoder
        self.token_texts = token_texts
        self.segmenter_arguments = segmenter_arguments
        self.lossy = lossy
        self.components = components
        self._raw_added = _added_matcher([token for token in added if not token.get("normalized")], None)
        self._normalized_added = _added_matcher([token for token in added if token.get("normalized")], normalizer)

    def encode(self, encoder: Any, text: str | bytes, split_added: bool = True) -> list[int]:
        """The ids of `text` through the file's pipeline and the core `encoder`."""
        return encoder.encode_words(*self._words(text, split_added))

    def encode_batch(
        self, encoder: Any, texts: list[str | bytes], num_threads: int | None, split_added: bool = True
    ) -> list[list[int]]:
        """`encode` of each text: the Python stages (added tokens, normaliser, pre-tokeniser
        steps) run here one text after another, the core's part in parallel on `num_threads`."""
        return encoder.encode_words_batch([self._words(text, split_added) for text in texts], num_threads)

    def _words(self, text: str | bytes, split_added: bool) -> tuple[bytes, list[int], list[tuple[int, int]]]:
        """The Python stages of the pipeline: the words of `text` back to back, their lengths,
        and each added token as (index of the word it precedes, id), for the core's encode_words."""
        if not isinstance(text, str):
            try:
                text = bytes(text).decode("utf-8")
            except (UnicodeDecodeError, TypeError) as error:
                raise EncodeError(
                    f"a tokeniser loaded from a {self.kind} file encodes text; the bytes given are not UTF-8 ({error})"
                ) from None
        elif not text.isascii():
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                # tokenizers takes Rust strings, which cannot hold one either.
                raise EncodeError(
                    f"a tokeniser loaded from a {self.kind} file encodes valid Unicode; the text has a lone "
                    f"surrogate U+{ord(text[error.start]):04X} at character {error.start}"
                ) from None
        words: list[bytes] = []
        added: list[tuple[int, int]] = []

        def add_text(piece: str, first: bool) -> None:
            if self.pre_tokenizer is None:
                pieces = [(piece, first)] if piece else []
            else:
                pieces = [(piece, first)]
                for step in self.pre_tokenizer:
                    pieces = step(pieces)
            words.extend(word.encode("utf-8") for word, _ in pieces if word)

        for raw, raw_id, raw_first in _split_added(text, self._raw_added if split_added else None, True):
            if raw_id is not None:
                added.append((len(words), raw_id))
                continue
            normalized = self.normalizer(raw) if self.normalizer is not None else raw
            for piece, piece_id, first in _split_added(normalized, self._normalized_added if split_added else None, raw_first):
                if piece_id is not None:
                    added.append((len(words), piece_id))
                else:
                    add_text(piece, first)
        return b"".join(words), [len(word) for word in words], added

    def decode(self, ids: list[int]) -> str:
        """The text of `ids` as the file's own library decodes it (no tokens skipped)."""
        tokens = [self.token_texts[token_id] for token_id in ids]
        if self.decoder is None:
            return " ".join(tokens)
        return "".join(self.decoder(tokens))

    def info(self) -> dict[str, Any]:
        """What `Tokenizer.info` adds for a loaded file: its components and where it loses text."""
        return {
            "loaded_from": self.kind,
            "pipeline": self.components,
            "added_tokens": {token["content"]: token["id"] for token in self.added},
            "lossy": self.lossy,
        }


def _added_matcher(tokens: list[dict[str, Any]], normalizer: Normalizer | None) -> tuple[Any, dict[str, int]] | None:
    """A regex finding the added tokens leftmost-longest (with their lstrip/rstrip whitespace),
    and content -> id; None when there are none."""
    if not tokens:
        return None
    ids: dict[str, int] = {}
    alternatives = []
    for token in sorted(tokens, key=lambda token: -len(token["content"])):
        content = token["content"] if normalizer is None else normalizer(token["content"])
        if not content or content in ids:
            continue
        ids[content] = token["id"]
        left = r"\s*" if token.get("lstrip") else ""
        right = r"\s*" if token.get("rstrip") else ""
        alternatives.append(f"{left}(?P<t{len(alternatives)}>{regex.escape(content)}){right}")
    contents = list(ids)
    order = {f"t{index}": contents[index] for index in range(len(contents))}
    return regex.compile("|".join(alternatives)), {name: ids[content] for name, content in order.items()}


def _split_added(text: str, matcher: tuple[Any, dict[str, int]] | None, first: bool) -> list[tuple[str, int | None, bool]]:
    """(piece, None, starts the input) for text between added tokens and ("", id, False) for each token."""
    if matcher is None:
        return [(text, None, first)] if text else []
    compiled, ids = matcher
    out: list[tuple[str, int | None, bool]] = []
    start = 0
    for match in compiled.finditer(text):
        if match.start() > start:
            out.append((text[start : match.start()], None, first and start == 0))
        out.append(("", ids[match.lastgroup], False))
        start = match.end()
    if start < len(text):
        out.append((text[start:], None, first and start == 0))
    return out


# ---- pre-tokenisers ---------------------------------------------------------------------------

def _spans(text: str, matches: Iterable[tuple[int, int]], behavior: str, invert: bool) -> list[tuple[int, int]]:
    """HF's split of `text` by matched spans with a delimiter behaviour; empty pieces dropped."""
    spans: list[tuple[int, int, bool]] = []
    previous = 0
    for start, end in matches:
        if start > previous:
            spans.append((previous, start, False))
        spans.append((start, end, True))
        previous = end
    if previous < len(text):
        spans.append((previous, len(text), False))
    if invert:
        spans = [(start, end, not is_match) for start, end, is_match in spans]
    if behavior == "Removed":
        out = [(start, end) for start, end, is_match in spans if not is_match]
    elif behavior == "Isolated":
        out = [(start, end) for start, end, _ in spans]
    elif behavior == "MergedWithPrevious":
        out, previous_match = [], False
        for start, end, is_match in spans:
            if is_match and not previous_match and out:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
            previous_match = is_match
    elif behavior == "MergedWithNext":
        out, next_match = [], False
        for start, end, is_match in reversed(spans):
            if is_match and not next_match and out:
                out[-1] = (start, out[-1][1])
            else:
                out.append((start, end))
            next_match = is_match
        out.reverse()
    else:  # Contiguous: neighbouring spans of the same kind join
        out, previous_match = [], False
        for start, end, is_match in spans:
            if is_match == previous_match and out:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
            previous_match = is_match
    return [(start, end) for start, end in out if end > start]


def _split_step(compiled: Any, behavior: str, invert: bool) -> PreTokenizerStep:
    def step(splits: list[Split]) -> list[Split]:
        out = []
        for text, first in splits:
            for start, end in _spans(text, (m.span() for m in compiled.finditer(text)), behavior, invert):
                out.append((text[start:end], first and start == 0))
        return out

    return step


def _matches_step(compiled: Any) -> PreTokenizerStep:
    """The pieces are the regex's matches (what is between them is dropped)."""

    def step(splits: list[Split]) -> list[Split]:
        return [(match.group(), first and match.start() == 0) for text, first in splits for match in compiled.finditer(text)]

    return step


def _map_step(function: Callable[[str, bool], str]) -> PreTokenizerStep:
    return lambda splits: [(function(text, first), first) for text, first in splits]


def _pre_tokenizer(node: Any, where: str, fail: Callable[[str], FormatError]) -> tuple[list[PreTokenizerStep], bool]:
    """The steps of a pre-tokenizer node, and whether it includes ByteLevel (byte-level vocabulary)."""
    kind = _type_of(node, where, fail)
    if kind == "Sequence":
        steps: list[PreTokenizerStep] = []
        byte_level = False
        for index, child in enumerate(_list_field(node, "pretokenizers", where, fail)):
            child_steps, child_byte_level = _pre_tokenizer(child, f"{where}.pretokenizers[{index}]", fail)
            steps += child_steps
            byte_level |= child_byte_level
        return steps, byte_level
    if kind == "ByteLevel":
        steps = []
        if node.get("add_prefix_space", False):
            steps.append(_map_step(lambda text, first: text if text.startswith(" ") else " " + text))
        if node.get("use_regex", True):
            steps.append(_split_step(regex.compile(HF_BYTE_LEVEL_REGEX), "Isolated", False))
        return steps, True
    if kind == "Split":
        pattern = node.get("pattern")
        behavior = node.get("behavior")
        if behavior not in ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"):
            raise fail(f"{where}.behavior is {behavior!r}, not one of HF's split behaviours")
        return [_split_step(_pattern(pattern, f"{where}.pattern", fail), behavior, bool(node.get("invert")))], False
    if kind == "Metaspace":
        replacement = node.get("replacement", "▁")
        scheme = _prepend_scheme(node)
        split = node.get("split", True)

        def metaspace(text: str, first: bool) -> str:
            text = text.replace(" ", replacement)
            if (scheme == "always" or (scheme == "first" and first)) and not text.startswith(replacement):
                text = replacement + text
            return text

        steps = [_map_step(metaspace)]
        if split:
            steps.append(_split_step(regex.compile(regex.escape(replacement)), "MergedWithNext", False))
        return steps, False
    if kind == "Whitespace":
        return [_matches_step(regex.compile(f"[{_WORD}]+|[^{_WORD}{_WHITE_SPACE}]+"))], False
    if kind == "WhitespaceSplit":
        return [_matches_step(regex.compile(f"[^{_WHITE_SPACE}]+"))], False
    if kind == "BertPreTokenizer":
        # whitespace removed, each punctuation character its own piece
        return [_matches_step(regex.compile(f"[{_BERT_PUNCTUATION}]|[^{_BERT_PUNCTUATION}{_WHITE_SPACE}]+"))], False
    if kind == "Punctuation":
        behavior = node.get("behavior", "Isolated")
        return [_split_step(regex.compile(f"[{_BERT_PUNCTUATION}]"), behavior, False)], False
    if kind == "Digits":
        behavior = "Isolated" if node.get("individual_digits") else "Contiguous"
        return [_split_step(regex.compile(r"\p{N}"), behavior, False)], False
    raise fail(f"{where} type {kind!r} is not supported")


def _prepend_scheme(node: dict[str, Any]) -> str:
    if "prepend_scheme" in node:
        return node["prepend_scheme"]
    return "always" if node.get("add_prefix_space", True) else "never"


def _pattern(pattern: Any, where: str, fail: Callable[[str], FormatError]) -> Any:
    if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        return regex.compile(regex.escape(pattern["String"]))
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        try:
            return regex.compile(pattern["Regex"])
        except regex.error as error:
            raise fail(f"{where} regex {pattern['Regex']!r} does not compile: {error}") from None
    raise fail(f"{where} is {pattern!r}, expected {{'String': ...}} or {{'Regex': ...}}")


def _core_split(node: Any) -> tuple[list[PreTokenizerStep], str] | None:
    """For a pre-tokenizer whose splitting is one regex's matches: the Python steps before it
    (prefix space, Metaspace's replacement) and the regex, which then runs in the core."""
    if not isinstance(node, dict):
        return None
    kind = node.get("type")
    if kind == "ByteLevel" and node.get("use_regex", True):
        steps = _pre_tokenizer(node, "pre_tokenizer", FormatError)[0][:-1]  # its regex split goes to the core
        return steps, HF_BYTE_LEVEL_REGEX
    if kind == "BertPreTokenizer":
        return [], f"[{_BERT_PUNCTUATION}]|[^{_BERT_PUNCTUATION}{_WHITE_SPACE}]+"
    if kind == "Whitespace":
        return [], f"[{_WORD}]+|[^{_WORD}{_WHITE_SPACE}]+"
    if kind == "WhitespaceSplit":
        return [], f"[^{_WHITE_SPACE}]+"
    if kind == "Metaspace" and node.get("split", True) and len(node.get("replacement", "▁")) == 1:
        steps = _pre_tokenizer(node, "pre_tokenizer", FormatError)[0][:-1]
        replacement = regex.escape(node.get("replacement", "▁"))
        # each replacement character starts a piece (MergedWithNext), text before the first is one
        return steps, f"{replacement}[^{replacement}]*|[^{replacement}]+"
    steps = node.get("pretokenizers") if kind == "Sequence" else None
    if (
        isinstance(steps, list)
        and len(steps) == 2
        and isinstance(steps[0], dict)
        and isinstance(steps[1], dict)
        and steps[0].get("type") == "Split"
        and steps[0].get("behavior") == "Isolated"
        and not steps[0].get("invert")
        and isinstance(steps[0].get("pattern"), dict)
        and isinstance(steps[0]["pattern"].get("Regex"), str)
        and steps[1].get("type") == "ByteLevel"
        and not steps[1].get("use_regex", True)
        and not steps[1].get("add_prefix_space")
    ):
        return [], steps[0]["pattern"]["Regex"]
    return None


# ---- normalisers ------------------------------------------------------------------------------

def _normalizer(node: Any, where: str, fail: Callable[[str], FormatError], lossy: list[str]) -> Normalizer:
    kind = _type_of(node, where, fail)
    if kind == "Sequence":
        steps = [
            _normalizer(child, f"{where}.normalizers[{index}]", fail, lossy)
            for index, child in enumerate(_list_field(node, "normalizers", where, fail))
        ]
        return normalizers.sequence(steps)
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        lossy.append(f"normaliser {kind} maps different texts to the same ids")
        return normalizers.unicode_form(kind)
    if kind == "Lowercase":
        lossy.append("normaliser Lowercase loses case")
        return normalizers.lowercase
    if kind == "Replace":
        pattern = node.get("pattern")
        content = node.get("content")
        if not isinstance(content, str):
            raise fail(f"{where}.content is {content!r}, expected a string")
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
            replace = normalizers.replace(pattern["String"], content, False)
        elif isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
            try:
                replace = normalizers.replace(pattern["Regex"], content, True)
            except regex.error as error:
                raise fail(f"{where}.pattern regex does not compile: {error}") from None
        else:
            raise fail(f"{where}.pattern is {pattern!r}, expected {{'String': ...}} or {{'Regex': ...}}")
        lossy.append(f"normaliser Replace({pattern!r} -> {content!r}) decodes to the replaced text")
        return replace
    if kind == "Prepend":
        prefix = node.get("prepend")
        if not isinstance(prefix, str):
            raise fail(f"{where}.prepend is {prefix!r}, expected a string")
        return normalizers.prepend(prefix)
    if kind == "Strip":
        lossy.append("normaliser Strip drops whitespace at the ends")
        return normalizers.strip(bool(node.get("strip_left")), bool(node.get("strip_right")))
    if kind == "BertNormalizer":
        lossy.append("normaliser BertNormalizer drops control characters, turns whitespace into spaces"
                     + (", lowercases and strips accents" if node.get("lowercase", True) else ""))
        return normalizers.bert(
            bool(node.get("clean_text", True)),
            bool(node.get("handle_chinese_chars", True)),
            node.get("strip_accents"),
            bool(node.get("lowercase", True)),
        )
    if kind == "Precompiled":
        blob = node.get("precompiled_charsmap")
        try:
            data = base64.b64decode(blob or "", validate=True)
        except (ValueError, TypeError):
            raise fail(f"{where}.precompiled_charsmap is not base64") from None
        lossy.append("normaliser Precompiled (SentencePiece's character map, NFKC-like) maps different texts to the same ids")
        return normalizers.precompiled(data, f"{where}.precompiled_charsmap")
    raise fail(f"{where} type {kind!r} is not supported")


# ---- decoders ---------------------------------------------------------------------------------

def _byte_fallback(tokens: list[str]) -> list[str]:
    out: list[str] = []
    pending = bytearray()

    def flush() -> None:
        if pending:
            try:
                out.append(pending.decode("utf-8"))
            except UnicodeDecodeError:
                out.extend("\ufffd" * len(pending))
            pending.clear()

    for token in tokens:
        if len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            try:
                pending.append(int(token[3:5], 16))
                continue
            except ValueError:
                pass
        flush()
        out.append(token)
    flush()
    return out


def _byte_level_decode(tokens: list[str]) -> list[str]:
    inverse = {char: byte for byte, char in enumerate(byte_to_char())}
    data = bytearray()
    for token in tokens:
        try:
            data += bytes(inverse[char] for char in token)
        except KeyError:
            data += token.encode("utf-8")
    return [data.decode("utf-8", "replace")]


def _strip_decoder(content: str, start: int, stop: int) -> Decoder:
    def decode(tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            begin = 0
            while begin < start and token[begin : begin + 1] == content:
                begin += 1
            end = len(token)
            while len(token) - end < stop and end > begin and token[end - 1] == content:
                end -= 1
            out.append(token[begin:end])
        return out

    return decode


def _metaspace_decoder(replacement: str, scheme: str) -> Decoder:
    def decode(tokens: list[str]) -> list[str]:
        out = []
        for index, token in enumerate(tokens):
            if index == 0 and scheme != "never":
                out.append(token.replace(replacement, ""))
            else:
                out.append(token.replace(replacement, " "))
        return out

    return decode


_WORDPIECE_CLEANUP = [
    (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"), (" 'm", "'m"),
    (" do not", " don't"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
]


def _wordpiece_decoder(prefix: str, cleanup: bool) -> Decoder:
    def decode(tokens: list[str]) -> list[str]:
        out = []
        for index, token in enumerate(tokens):
            if index > 0:
                token = token.replace(prefix, "", 1) if token.startswith(prefix) else " " + token
            if cleanup:
                for old, new in _WORDPIECE_CLEANUP:
                    token = token.replace(old, new)
            out.append(token)
        return out

    return decode


def _decoder(node: Any, where: str, fail: Callable[[str], FormatError]) -> Decoder:
    kind = _type_of(node, where, fail)
    if kind == "Sequence":
        steps = [_decoder(child, f"{where}.decoders[{index}]", fail) for index, child in enumerate(_list_field(node, "decoders", where, fail))]

        def decode(tokens: list[str]) -> list[str]:
            for step in steps:
                tokens = step(tokens)
            return tokens

        return decode
    if kind == "ByteLevel":
        return _byte_level_decode
    if kind == "ByteFallback":
        return _byte_fallback
    if kind == "Fuse":
        return lambda tokens: ["".join(tokens)]
    if kind == "Strip":
        return _strip_decoder(node.get("content", " "), int(node.get("start", 0)), int(node.get("stop", 0)))
    if kind == "Replace":
        pattern = node.get("pattern")
        content = node.get("content", "")
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
            old = pattern["String"]
            return lambda tokens: [token.replace(old, content) for token in tokens]
        compiled = _pattern(pattern, f"{where}.pattern", fail)
        return lambda tokens: [compiled.sub(lambda match: content, token) for token in tokens]
    if kind == "Metaspace":
        return _metaspace_decoder(node.get("replacement", "▁"), _prepend_scheme(node))
    if kind == "WordPiece":
        return _wordpiece_decoder(node.get("prefix", "##"), bool(node.get("cleanup", True)))
    raise fail(f"{where} type {kind!r} is not supported")


# ---- the file ---------------------------------------------------------------------------------

def _type_of(node: Any, where: str, fail: Callable[[str], FormatError]) -> str:
    if not isinstance(node, dict) or not isinstance(node.get("type"), str):
        raise fail(f"{where} is not an object with a 'type'")
    return node["type"]


def _list_field(node: dict[str, Any], name: str, where: str, fail: Callable[[str], FormatError]) -> list[Any]:
    value = node.get(name)
    if not isinstance(value, list):
        raise fail(f"{where}.{name} is not a list")
    return value


def load_huggingface(path: str | Path) -> Tokenizer:
    """Reads a HF `tokenizer.json` (BPE, WordPiece or Unigram with the components GPT-2, Llama,
    BERT and XLM-R files use); encodes to the ids `tokenizers` gives, decodes as it decodes."""
    from polytok.tokenizer import read_json

    return tokenizer_from_huggingface(read_json(path), f"tokenizer file {path}")


def tokenizer_from_huggingface(record: Any, source: str) -> Tokenizer:
    """Builds the Tokenizer of a parsed tokenizer.json; FormatError names the unsupported
    component and its JSON path."""

    def fail(problem: str) -> FormatError:
        return FormatError(f"{source}: {problem}")

    if not isinstance(record, dict):
        raise fail(f"expected a JSON object, found {type(record).__name__}")
    model = record.get("model")
    model_type = model.get("type") if isinstance(model, dict) else None
    if model_type is None and isinstance(model, dict) and "merges" in model:
        model_type = "BPE"
    if model_type not in ("BPE", "WordPiece", "Unigram"):
        raise fail(f"model type {model_type!r} is not supported (polytok reads BPE, WordPiece and Unigram)")
    # (the post_processor only adds tokens when asked to; polytok's encode never asks)
    for field in ("truncation", "padding"):
        if record.get(field) not in (None, {}):
            raise fail(f"{field} is set; polytok encodes whole texts without {field}")
    lossy: list[str] = []
    normalizer = None
    if record.get("normalizer") is not None:
        normalizer = _normalizer(record["normalizer"], "normalizer", fail, lossy)
    steps: list[PreTokenizerStep] | None = None
    byte_level = False
    if record.get("pre_tokenizer") is not None:
        steps, byte_level = _pre_tokenizer(record["pre_tokenizer"], "pre_tokenizer", fail)
    decoder = None if record.get("decoder") is None else _decoder(record["decoder"], "decoder", fail)
    core_split = _core_split(record.get("pre_tokenizer"))
    if core_split is not None:
        steps, core_pattern = core_split
    else:
        core_pattern = None

    # token texts: the model's vocabulary, then added tokens beyond it
    texts: dict[int, str] = {}
    if model_type == "Unigram":
        entries = model.get("vocab")
        if not isinstance(entries, list):
            raise fail("model.vocab is not a list of [piece, score]")
        scores: dict[int, float] = {}
        for index, entry in enumerate(entries):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str) and isinstance(entry[1], (int, float))):
                raise fail(f"model.vocab[{index}] is {entry!r}, expected [piece, score]")
            texts[index] = entry[0]
            scores[index] = as_tokenizers_reads_it(float(entry[1]))
    else:
        raw_vocab = model.get("vocab")
        if not isinstance(raw_vocab, dict):
            raise fail("model.vocab is not an object")
        for text, token_id in raw_vocab.items():
            if isinstance(token_id, bool) or not isinstance(token_id, int) or token_id < 0 or token_id in texts:
                raise fail(f"model.vocab[{text!r}] has id {token_id!r}; ids must be distinct non-negative integers")
            texts[token_id] = text
    model_size = len(texts)
    added: list[dict[str, Any]] = []
    for index, token in enumerate(record.get("added_tokens") or []):
        if not isinstance(token, dict) or not isinstance(token.get("content"), str) or not token["content"] \
                or isinstance(token.get("id"), bool) or not isinstance(token.get("id"), int) or token["id"] < 0:
            raise fail(f"added_tokens[{index}] is not a token with an 'id' and a non-empty 'content'")
        if token.get("single_word"):
            raise fail(f"added_tokens[{index}] ({token['content']!r}) has single_word true, which is not supported")
        if texts.setdefault(token["id"], token["content"]) != token["content"] and token["id"] >= model_size:
            raise fail(f"added_tokens[{index}] reuses id {token['id']}")
        added.append(token)
    size = max(texts) + 1 if texts else 0
    missing = next((token_id for token_id in range(size) if token_id not in texts), None)
    if missing is not None:
        raise fail(f"no token has id {missing}; ids must run from 0 without gaps")
    token_texts = [texts[token_id] for token_id in range(size)]
    # HF decodes an added token to its content (normalised if the token is matched normalised),
    # even where the model's vocabulary has the id
    decode_texts = list(token_texts)
    for token in added:
        normalized = token.get("normalized") and normalizer is not None
        decode_texts[token["id"]] = normalizer(token["content"]) if normalized else token["content"]
    if model.get("byte_fallback"):
        # the spelling HF looks byte tokens up by: "<0x" two upper-case hex digits ">"
        byte_tokens = [(int(text[3:5], 16), token_id) for token_id, text in enumerate(token_texts)
                       if len(text) == 6 and _is_hex(text[3:5]) and text == f"<0x{int(text[3:5], 16):02X}>"]
    else:
        byte_tokens = []
    byte_of = dict((token_id, byte) for byte, token_id in byte_tokens)
    vocab: list[bytes] = []
    for token_id, text in enumerate(token_texts):
        if token_id in byte_of:
            vocab.append(bytes([byte_of[token_id]]))
        elif byte_level and token_id < model_size:
            try:
                vocab.append(from_byte_level(text))
            except KeyError:
                vocab.append(text.encode("utf-8"))
        else:
            vocab.append(text.encode("utf-8"))
        if not vocab[-1]:
            raise fail(f"token {token_id} is empty")
    model_strings = [(vocab[token_id] if byte_level else texts[token_id].encode("utf-8"), token_id) for token_id in range(model_size)]

    def unk_id(name: str | None) -> int | None:
        if name is None:
            return None
        found = model.get("vocab", {}).get(name) if isinstance(model.get("vocab"), dict) else None
        if found is None:
            raise fail(f"model.unk_token {name!r} is not in model.vocab")
        return found

    components = {
        "model": model_type,
        "normalizer": _describe(record.get("normalizer"), "normalizers"),
        "pre_tokenizer": _describe(record.get("pre_tokenizer"), "pretokenizers"),
        "decoder": _describe(record.get("decoder"), "decoders"),
    }
    if model_type in ("WordPiece", "Unigram") and normalizer is None and _plain_specials(added, model_size):
        # what polytok writes for its WordPiece and Unigram reads back as the native tokeniser
        native = _native_subword(record, token_texts[:model_size], [float(entry[1]) for entry in model["vocab"]] if model_type == "Unigram" else None,
                                 {token["content"]: token["id"] for token in added})
        if native is not None:
            return native
    if model_type == "BPE":
        for option in ("continuing_subword_prefix", "end_of_word_suffix"):
            if model.get(option):
                raise fail(f"model.{option} {model[option]!r} is not supported")
        if model.get("dropout"):
            raise fail("model.dropout is set; BPE dropout makes HF's ids random")
        ids_of = {text: token_id for token_id, text in texts.items() if token_id < model_size}
        merges = []
        for index, merge in enumerate(model.get("merges") or []):
            pair = merge.split(" ") if isinstance(merge, str) else merge
            if not isinstance(pair, list) or len(pair) != 2:
                raise fail(f"model.merges[{index}] is {merge!r}, expected two tokens")
            left, right = ids_of.get(pair[0]), ids_of.get(pair[1])
            merged = ids_of.get(pair[0] + pair[1]) if isinstance(pair[0], str) and isinstance(pair[1], str) else None
            if left is None or right is None or merged is None:
                raise fail(f"model.merges[{index}] ({merge!r}) names a token outside model.vocab")
            merges.append((left, right, merged))
        unk = unk_id(model.get("unk_token"))
        if unk is not None:
            lossy.append(f"characters outside the vocabulary become the unknown token {model['unk_token']!r}")
        all_bytes = byte_level and all(bytes([byte]) in set(vocab[:model_size]) for byte in range(256))
        if byte_level and all_bytes and not model.get("ignore_merges") and core_pattern is not None and not steps \
                and normalizer is None and unk is None:
            pairs = [(left, right) for left, right, _ in merges]
            if _plain_specials(added, model_size) and _decodes_bytes(record.get("decoder")):
                # What polytok writes: nothing HF-specific is left, so this is a native tokeniser
                # (special tokens need allowed_special, it saves as polytok JSON, it samples).
                specials = {token["content"]: token["id"] for token in added}
                try:
                    return Tokenizer(vocab[:model_size], segmenter="merges", pattern=core_pattern,
                                     special_tokens=specials, merges=pairs, algorithm="bpe")
                except (ConfigError, PatternError) as error:
                    raise FormatError(f"{source}: {error}") from None
            # the fast path: polytok's own merges segmenter, the regex in the core
            pipeline = LoadedPipeline(kind="HF tokenizer.json", record=record, added=added, normalizer=None,
                                      pre_tokenizer=None, decoder=decoder, token_texts=decode_texts,
                                      segmenter_arguments={}, lossy=lossy, components=components)
            return _build(vocab, "merges", core_pattern, pipeline, source, merges=pairs, algorithm="bpe")
        arguments = dict(
            pattern=core_pattern, tokens=vocab, strings=model_strings, merges=merges, byte_tokens=byte_tokens,
            byte_fallback=bool(model.get("byte_fallback")), unk=unk, fuse_unk=bool(model.get("fuse_unk")),
            byte_symbols=byte_level, ignore_merges=bool(model.get("ignore_merges")), merge_ranks=None,
        )
        segmenter = "char_merges"
    elif model_type == "WordPiece":
        unk = unk_id(model.get("unk_token", "[UNK]"))
        if unk is None:
            raise fail("model.unk_token is missing; a WordPiece model needs one for words it cannot cut")
        prefix = model.get("continuing_subword_prefix", "##") or ""
        max_chars = int(model.get("max_input_chars_per_word", 100))
        lossy.append(f"words that cannot be cut, or longer than {max_chars} characters, become {model.get('unk_token', '[UNK]')!r}")
        arguments = dict(pattern=core_pattern, tokens=vocab, strings=model_strings, continuation=prefix.encode("utf-8"),
                         max_chars=max_chars, unk=unk)
        segmenter = "char_longest_match"
    else:
        unk = model.get("unk_id")
        if unk is not None and not (isinstance(unk, int) and 0 <= unk < model_size):
            raise fail(f"model.unk_id {unk!r} is not an id of model.vocab")
        if unk is not None:
            lossy.append(f"characters outside the vocabulary become the unknown token {texts[unk]!r}")
        lattice = [(texts[token_id].encode("utf-8"), token_id, scores[token_id]) for token_id in range(model_size)]
        minimum = min(scores.values()) if scores else 0.0
        arguments = dict(pattern=core_pattern, tokens=vocab, lattice=lattice, byte_tokens=byte_tokens, byte_fallback=bool(model.get("byte_fallback")),
                         unk=unk, fuse_unk=True, unk_score=minimum - 10.0, single_precision=False)
        segmenter = "char_viterbi"
    pipeline = LoadedPipeline(kind="HF tokenizer.json", record=record, added=added, normalizer=normalizer,
                              pre_tokenizer=steps,
                              decoder=decoder, token_texts=decode_texts, segmenter_arguments=arguments,
                              lossy=lossy, components=components)
    marker = (model.get("continuing_subword_prefix", "##") or None) if model_type == "WordPiece" else None
    return _build(vocab, segmenter, None, pipeline, source, continuation_marker=marker,
                  algorithm={"BPE": "bpe", "WordPiece": "wordpiece", "Unigram": "unigram"}[model_type])


_UINT64_MAX = 2**64 - 1
_POWERS_OF_TEN = [float(f"1e{exponent}") for exponent in range(309)]


def as_tokenizers_reads_it(score: float) -> float:
    """The float `tokenizers` gets from the JSON text of `score`. Its JSON parser (serde_json
    without exact float parsing) reads the decimal digits into a u64, converts that to f64 and
    divides by a power of ten, which can be one unit in the last place off the correctly
    rounded value; Unigram ties between equal-looking paths then break the other way. HF writes
    the shortest round-trip digits, which is what repr gives back."""
    return tokenizers_float(repr(score), score)


def tokenizers_float(text: str, default: float) -> float:
    """The float `tokenizers` reads from the JSON number `text` (see as_tokenizers_reads_it);
    `default` where its parser takes another route."""
    score = default
    if not all(char in "0123456789.-+eE" for char in text):
        return score  # inf or nan: no JSON number
    negative = text.startswith("-")
    mantissa, _, exponent_text = text.lstrip("-").partition("e")
    integer, _, fraction = mantissa.partition(".")
    significand, exponent, overflowed = 0, int(exponent_text or 0), False
    for position, digit in enumerate(integer + fraction):
        value = int(digit)
        if significand > (_UINT64_MAX - value) // 10:
            if position < len(integer):
                return score  # an integer part beyond u64: serde reads it another way; never a score
            overflowed = True  # further fraction digits are ignored
        if not overflowed:
            significand = significand * 10 + value
            exponent -= position >= len(integer)
    result = float(significand)
    while True:
        if abs(exponent) < len(_POWERS_OF_TEN):
            result = result * _POWERS_OF_TEN[exponent] if exponent >= 0 else result / _POWERS_OF_TEN[-exponent]
            break
        if result == 0.0:
            break
        result /= 1e308
        exponent += 308
    return -result if negative else result


def _native_subword(record: dict[str, Any], texts: list[str], scores: list[float] | None,
                    specials: dict[str, int]) -> Tokenizer | None:
    """The polytok WordPiece (longest_match) or Unigram (viterbi) tokeniser of a file shaped as
    huggingface_record writes it, or None for any other file."""
    pre_tokenizer = record.get("pre_tokenizer")
    plain_byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if pre_tokenizer == plain_byte_level:
        pattern = None
    else:
        split = _core_split(pre_tokenizer)
        if split is None or split[0] or pre_tokenizer.get("type") != "Sequence":
            return None
        pattern = split[1]
    model = record["model"]
    try:
        if model["type"] == "WordPiece":
            prefix = model.get("continuing_subword_prefix")
            if model.get("max_input_chars_per_word") != MAX_WORD_CHARACTERS or not isinstance(prefix, str) \
                    or (prefix and not (prefix.startswith(CONTINUATION_TAG) and len(prefix) > len(CONTINUATION_TAG))):
                return None
            marker = prefix[len(CONTINUATION_TAG):] or None
            vocab = [
                marker.encode("utf-8") + from_byte_level(text[len(prefix):])
                if marker and len(text) > len(prefix) and text.startswith(prefix) else from_byte_level(text)
                for text in texts
            ]
            return Tokenizer(vocab, segmenter="longest_match", pattern=pattern, special_tokens=specials,
                             continuation_marker=marker, algorithm="wordpiece")
        if model.get("unk_id") is not None or model.get("byte_fallback") or scores is None:
            return None
        vocab = [from_byte_level(text) for text in texts]
        return Tokenizer(vocab, segmenter="viterbi", pattern=pattern, special_tokens=specials,
                         scores=scores, algorithm="unigram")
    except (KeyError, ConfigError, PatternError, ValueError):
        return None  # not polytok's shape (a character outside the byte-level table, a gap): read generically


def _is_hex(text: str) -> bool:
    return all(char in "0123456789abcdefABCDEF" for char in text)


def _describe(node: Any, children: str) -> Any:
    """A component tree's types, e.g. ["Split", "ByteLevel"] for a Sequence."""
    if not isinstance(node, dict):
        return None
    if node.get("type") == "Sequence":
        return [_describe(child, children) for child in node.get(children) or []]
    return node.get("type")


def _plain_specials(added: list[dict[str, Any]], model_size: int) -> bool:
    """Whether every added token is a special token matched as-is, with an id after the model's."""
    return all(
        token.get("special") and not token.get("normalized") and not token.get("lstrip")
        and not token.get("rstrip") and token["id"] >= model_size
        for token in added
    )


def _decodes_bytes(decoder: Any) -> bool:
    """Whether decoding is joining the tokens' bytes: no decoder, or a plain ByteLevel one."""
    return decoder is None or (isinstance(decoder, dict) and decoder.get("type") == "ByteLevel")


def _build(vocab: list[bytes], segmenter: str, pattern: str | None, pipeline: LoadedPipeline, source: str, **options: Any) -> Tokenizer:
    try:
        return Tokenizer(vocab, segmenter=segmenter, pattern=pattern, pipeline=pipeline, **options)
    except (ConfigError, PatternError) as error:
        raise FormatError(f"{source}: {error}") from None


def _core_constructor(name: str) -> Callable[[Tokenizer], Any]:
    return lambda tokenizer: getattr(_core.Encoder, name)(**tokenizer.pipeline.segmenter_arguments)


for _name in ("char_merges", "char_viterbi", "char_longest_match"):
    register_segmenter(_name)(_core_constructor(_name))
