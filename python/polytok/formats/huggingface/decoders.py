"""HF decoders, as `tokenizers` applies them: ByteLevel, ByteFallback, Fuse, Strip, Replace,
Metaspace and WordPiece, and Sequences of them. A decoder maps the tokens' texts (as the file
spells them) to pieces of output text."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from polytok.errors import DecodeError
from polytok.formats.huggingface.nodes import Fail, char_field, compile_pattern, int_field, list_field, regex_timeout, shown, text_field, type_of
from polytok.formats.huggingface.pre_tokenizers import byte_to_char, prepend_scheme

Decoder = Callable[[list[str]], list[str]]


def _byte_fallback(tokens: list[str]) -> list[str]:
    """ByteFallback: runs of <0xXX> tokens become their text, one U+FFFD per byte where not UTF-8."""
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
    """ByteLevel: the tokens' byte-level characters back to bytes, then to text."""
    inverse = {char: byte for byte, char in enumerate(byte_to_char())}
    data = bytearray()
    for token in tokens:
        try:
            data += bytes(inverse[char] for char in token)
        except KeyError:
            data += token.encode("utf-8")
    return [data.decode("utf-8", "replace")]


def _strip_decoder(content: str, start: int, stop: int) -> Decoder:
    """Strip: up to `start` leading and `stop` trailing `content` characters off each token."""

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
    """Metaspace: the replacement character becomes a space, except the first token's prefix."""

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
    """WordPiece: continuation tokens lose `prefix`, others get a space before them; `cleanup`
    joins punctuation and contractions back onto their word."""

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


def decoder(node: Any, where: str, fail: Fail) -> Decoder:
    """The decoder of a decoder node."""
    kind = type_of(node, where, fail)
    if kind == "Sequence":
        steps = [decoder(child, f"{where}.decoders[{index}]", fail) for index, child in enumerate(list_field(node, "decoders", where, fail))]

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
        return _strip_decoder(char_field(node, "content", " ", where, fail), int_field(node, "start", 0, where, fail, limit=2**63),
                              int_field(node, "stop", 0, where, fail, limit=2**63))
    if kind == "Replace":
        pattern = node.get("pattern")
        content = text_field(node, "content", "", where, fail)
        if isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
            old = pattern["String"]
            return lambda tokens: [token.replace(old, content) for token in tokens]
        compiled = compile_pattern(pattern, f"{where}.pattern", fail)

        def replace(tokens: list[str]) -> list[str]:
            try:
                return [compiled.sub(lambda match: content, token, timeout=regex_timeout(token)) for token in tokens]
            except TimeoutError:
                raise DecodeError(f"the decoder's regex {shown(compiled.pattern)} backtracks catastrophically on a token") from None

        return replace
    if kind == "Metaspace":
        return _metaspace_decoder(char_field(node, "replacement", "▁", where, fail), prepend_scheme(node, where, fail))
    if kind == "WordPiece":
        return _wordpiece_decoder(text_field(node, "prefix", "##", where, fail), bool(node.get("cleanup", True)))
    raise fail(f"{where} type {kind!r} is not supported")
