"""Hugging Face `tokenizer.json` for byte-level BPE: written so that
`tokenizers.Tokenizer.from_file` loads it and encodes to the same ids as polytok.

The pipeline: a Split pre-tokeniser with polytok's regex (matches kept as pieces), ByteLevel
(bytes -> printable characters, GPT-2's table; no regex, no prefix space), the BPE model with the
merge list, the ByteLevel decoder, and the special tokens as added tokens. HF's BPE replays the
merges in order, which is what polytok's merges segmenter does.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from polytok.errors import ConfigError, FormatError
from polytok.tokenizer import Tokenizer


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
    """Writes `tokenizer` as a HF tokenizer.json (byte-level BPE)."""
    from polytok.formats import write_atomically

    record = huggingface_record(tokenizer)
    write_atomically(path, (json.dumps(record, ensure_ascii=False, indent=2) + "\n").encode("utf-8"))


def huggingface_record(tokenizer: Tokenizer) -> dict[str, Any]:
    """The tokenizer.json content as a dict; ConfigError when HF cannot reproduce the ids."""
    if tokenizer.segmenter != "merges":
        raise ConfigError(
            f"HF tokenizer.json export is for BPE; this tokeniser's {tokenizer.segmenter!r} segmenter "
            f"has no HF equivalent that gives the same ids"
        )
    vocab = tokenizer.vocab
    ids: dict[bytes, int] = {}
    for token_id, token in enumerate(vocab):
        if token in ids:
            raise ConfigError(f"tokens {ids[token]} and {token_id} are both {token!r}; HF's vocabulary needs distinct tokens")
        ids[token] = token_id
    missing = [byte for byte in range(256) if bytes([byte]) not in ids]
    if missing:
        raise ConfigError(f"byte 0x{missing[0]:02x} is not a token; HF byte-level BPE needs all 256 bytes")
    pattern = None if tokenizer.pattern is None else to_oniguruma(tokenizer.pattern)
    pairs = tokenizer.merges if tokenizer.merges is not None else merges_from_ranks(vocab)
    merges = [f"{to_byte_level(vocab[left])} {to_byte_level(vocab[right])}" for left, right in pairs]
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
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": {to_byte_level(token): token_id for token_id, token in enumerate(vocab)},
            "merges": merges,
        },
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


def tokenizer_from_huggingface(record: dict[str, Any], source: str) -> Tokenizer:
    """Reads a byte-level BPE tokenizer.json of the shape `save_huggingface` writes."""

    def fail(problem: str) -> FormatError:
        return FormatError(f"{source}: {problem}; polytok reads HF files of byte-level BPE with a Split regex")

    model = record.get("model")
    if not isinstance(model, dict) or model.get("type") != "BPE":
        raise fail("field 'model' is not a BPE model")
    if record.get("normalizer") is not None:
        raise fail("field 'normalizer' is set")
    pattern = _pattern_of(record.get("pre_tokenizer"), fail)
    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise fail("field 'model.vocab' is not an object")
    vocab: list[bytes | None] = [None] * len(raw_vocab)
    for text, token_id in raw_vocab.items():
        if not isinstance(token_id, int) or not 0 <= token_id < len(vocab) or vocab[token_id] is not None:
            raise fail(f"field 'model.vocab'[{text!r}] has id {token_id!r}; ids must be 0..{len(vocab) - 1}, each once")
        try:
            vocab[token_id] = from_byte_level(text)
        except KeyError:
            raise fail(f"field 'model.vocab'[{text!r}] is not byte-level text") from None
    ids = {token: token_id for token_id, token in enumerate(vocab)}
    merges = []
    for index, merge in enumerate(model.get("merges") or []):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2:
            raise fail(f"field 'model.merges'[{index}] is {merge!r}, expected two tokens")
        try:
            merges.append((ids[from_byte_level(pair[0])], ids[from_byte_level(pair[1])]))
        except KeyError:
            raise fail(f"field 'model.merges'[{index}] ({merge!r}) names a token outside the vocabulary") from None
    special_tokens = {}
    for index, added in enumerate(record.get("added_tokens") or []):
        if not isinstance(added, dict) or not isinstance(added.get("content"), str) or not isinstance(added.get("id"), int):
            raise fail(f"field 'added_tokens'[{index}] is not a token with 'id' and 'content'")
        if added["id"] < len(vocab):
            raise fail(f"field 'added_tokens'[{index}] reuses the ordinary id {added['id']}")
        special_tokens[added["content"]] = added["id"]
    try:
        return Tokenizer(vocab, segmenter="merges", pattern=pattern, special_tokens=special_tokens,
                         merges=merges, algorithm="bpe")
    except ConfigError as error:
        raise FormatError(f"{source}: {error}") from None


def _pattern_of(pre_tokenizer: Any, fail) -> str | None:
    """The regex of a Split + ByteLevel(use_regex=False) pre-tokeniser, or GPT-2's for a
    ByteLevel(use_regex=True) one (the regex HF's ByteLevel applies)."""
    if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == "ByteLevel":
        if pre_tokenizer.get("add_prefix_space"):
            raise fail("the ByteLevel pre-tokeniser adds a prefix space")
        return HF_BYTE_LEVEL_REGEX if pre_tokenizer.get("use_regex", True) else None
    if isinstance(pre_tokenizer, dict) and pre_tokenizer.get("type") == "Sequence":
        steps = pre_tokenizer.get("pretokenizers") or []
        if (
            len(steps) == 2
            and steps[0].get("type") == "Split"
            and steps[0].get("behavior") == "Isolated"
            and not steps[0].get("invert")
            and isinstance(steps[0].get("pattern"), dict)
            and "Regex" in steps[0]["pattern"]
            and steps[1].get("type") == "ByteLevel"
            and not steps[1].get("use_regex", True)
            and not steps[1].get("add_prefix_space")
        ):
            return steps[0]["pattern"]["Regex"]
    raise fail("field 'pre_tokenizer' is not Split(regex, Isolated) + ByteLevel(use_regex=false)")
