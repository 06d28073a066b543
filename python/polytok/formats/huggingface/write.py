"""Writing polytok's byte-level BPE, WordPiece and Unigram as a HF `tokenizer.json` that
`tokenizers.Tokenizer.from_file` encodes to the same ids and `polytok.load` reads back as the
native tokeniser.

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

import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

from polytok.errors import ConfigError
from polytok.files import write_atomically
from polytok.formats.huggingface.pre_tokenizers import to_byte_level
from polytok.tokenizer import Tokenizer


def save_huggingface(tokenizer: Tokenizer, path: str | Path) -> None:
    """Writes `tokenizer` as a HF tokenizer.json (byte-level BPE, WordPiece or Unigram; see the
    module docstring); ConfigError for what HF cannot reproduce, and nothing is written then."""
    record = huggingface_record(tokenizer)
    if record["model"]["type"] == "Unigram":
        # the scores are written in digits that `tokenizers` reads back exactly
        vocab = record["model"]["vocab"]
        record["model"]["vocab"] = _VOCAB_PLACEHOLDER
        before, _, after = json.dumps(record, ensure_ascii=False, indent=2).rpartition(json.dumps(_VOCAB_PLACEHOLDER))
        entries = ",\n".join(f"      [{json.dumps(piece, ensure_ascii=False)}, {score_text(score)}]" for piece, score in vocab)
        text = before + "[\n" + entries + "\n    ]" + after
    else:
        text = json.dumps(record, ensure_ascii=False, indent=2)
    write_atomically(path, (text + "\n").encode("utf-8"))


def save_record(record: dict[str, Any], path: str | Path) -> None:
    """Writes a tokenizer.json record as it was read (a loaded file written back keeps every id)."""
    write_atomically(path, (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))


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
        if not token:
            continue
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
        "vocab": _bpe_vocab(tokenizer),
        "merges": [f"{to_byte_level(vocab[left])} {to_byte_level(vocab[right])}" for left, right in pairs],
    }


def _bpe_vocab(tokenizer: Tokenizer) -> dict[str, int]:
    """Each token's byte-level spelling -> id. An empty entry is an unused id: HF leaves a gap
    free, but numbers added tokens after the model's vocabulary unless the model holds them, so a
    special token whose id is among the ordinary ones is in the model's vocabulary too, under
    its text (no merge makes it, so BPE never produces it from text)."""
    vocab = {to_byte_level(token): token_id for token_id, token in enumerate(tokenizer.vocab) if token}
    for text, token_id in sorted(tokenizer.special_tokens.items(), key=lambda item: item[1]):
        if token_id < len(tokenizer.vocab):
            if text in vocab:
                raise ConfigError(f"special token {text!r} (id {token_id}) is spelled as token {vocab[text]}; HF's "
                                  "vocabulary would give both one id")
            vocab[text] = token_id
    return vocab


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
    # An empty entry is a special token's id (an extended vocabulary's): HF's Unigram numbers its
    # pieces by position, so the special's text holds the place; HF cuts special tokens out of the
    # text before the model runs, so the model never produces it.
    specials = {token_id: text for text, token_id in tokenizer.special_tokens.items()}
    vocab = []
    for token_id, (token, score) in enumerate(zip(tokenizer.vocab, scores)):
        if not token and token_id not in specials:
            raise ConfigError(f"id {token_id} is no token (an empty entry) and no special token's; HF's Unigram "
                              "numbers its pieces without gaps")
        vocab.append([to_byte_level(token) if token else specials[token_id], float(score)])
    return {"type": "Unigram", "unk_id": None, "byte_fallback": False, "vocab": vocab}


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
    rank = {token: token_id for token_id, token in enumerate(vocab) if token}
    merges = []
    for token_id, token in enumerate(vocab):
        if len(token) < 2:  # single bytes, and the empty entries of unused ids
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
