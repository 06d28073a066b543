"""Writing a polytok tokeniser as a SentencePiece `.model` with the same ids, for the tokenisers
the format can hold (`check_sentencepiece_exportable` says which, and why)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from polytok.errors import ConfigError
from polytok.files import write_atomically
from polytok.formats.sentencepiece.proto import field_bytes, field_float, field_int
from polytok.formats.sentencepiece.read import BPE, BYTE, NORMAL, UNIGRAM, UNKNOWN, USER_DEFINED
from polytok.tokenizer import Tokenizer


def _piece(text: str, score: float, kind: int) -> bytes:
    return field_bytes(1, text.encode("utf-8")) + field_float(2, score) + field_int(3, kind)


def _whole_characters(token: bytes) -> str | None:
    try:
        return token.decode("utf-8")
    except UnicodeDecodeError:
        return None


def check_sentencepiece_exportable(tokenizer: Any) -> None:
    """ConfigError saying why `tokenizer` cannot be a SentencePiece model with the same ids.

    SentencePiece runs BPE (joining the adjacent pair whose join is the piece of highest score:
    tiktoken's rank rule) or Unigram (Viterbi) over the whole text, character by character, and
    spells unknown characters as byte pieces. So the tokeniser must be BPE (`merges`) or Unigram
    (`viterbi`) without a pre-tokenisation pattern (SentencePiece has no regex split: its pieces
    could cross pre-token boundaries), every token longer than one byte must be whole UTF-8
    characters (pieces are text), every character inside a token must be a token itself (else
    SentencePiece could join a character polytok spells in bytes), and a Unigram character
    token must score above its bytes together (SentencePiece never spells a known character in
    bytes)."""
    if not isinstance(tokenizer, Tokenizer):
        raise ConfigError(f"a tokeniser loaded from a {tokenizer.pipeline.kind} file is written back in its own format; keep the original file")
    if tokenizer.segmenter not in ("merges", "viterbi"):
        why = {
            "longest_match": "SentencePiece has no greedy longest-match (WordPiece) model",
            "shortest_path": "SentencePiece's Unigram can count tokens but does not break ties as the fewest-tokens segmenter does",
        }.get(tokenizer.segmenter, "SentencePiece models are BPE or Unigram")
        raise ConfigError(f"a SentencePiece model cannot reproduce the {tokenizer.segmenter!r} segmenter: {why}")
    if tokenizer.pattern is not None:
        raise ConfigError(
            "a SentencePiece model has no pre-tokenisation regex, so its pieces may cross the pre-token boundaries this "
            "tokeniser never crosses; only tokenisers trained with pattern=None can be written as one"
        )
    seen: dict[bytes, int] = {}
    characters: set[str] = set()
    for token_id, token in enumerate(tokenizer.vocab):
        if not token:
            raise ConfigError(f"id {token_id} is no token (an empty entry); a SentencePiece model numbers its pieces without gaps")
        if token in seen:
            raise ConfigError(f"tokens {seen[token]} and {token_id} are both {token!r}; SentencePiece pieces must be distinct")
        seen[token] = token_id
        if len(token) > 1:
            text = _whole_characters(token)
            if text is None:
                raise ConfigError(
                    f"token {token_id} {token!r} holds part of a character; SentencePiece pieces are whole characters "
                    "(only single bytes can be byte pieces)"
                )
            characters.update(text)
    for character in sorted(characters):
        if character.encode("utf-8") not in seen:
            raise ConfigError(
                f"the character {character!r} occurs in tokens but is no token itself; SentencePiece would join it into "
                "those tokens where polytok spells it in bytes"
            )
    if tokenizer.segmenter == "viterbi":
        if "\0" in characters:
            raise ConfigError(
                "a token holds the NUL character; SentencePiece treats NUL as unknown, scored unlike polytok's NUL token"
            )
        scores = tokenizer.scores
        for character in sorted(characters):
            data = character.encode("utf-8")
            if len(data) > 1 and scores[seen[data]] <= sum(scores[byte] for byte in data):
                raise ConfigError(
                    f"token {seen[data]} {character!r} scores no more than its bytes together, so polytok may spell it in "
                    "bytes where SentencePiece never does"
                )


def sentencepiece_model(tokenizer: Any) -> bytes:
    """The serialised ModelProto of `tokenizer` (see `check_sentencepiece_exportable`): one piece
    per id in id order (special tokens as user-defined pieces), then the unknown piece
    SentencePiece requires, which byte fallback never emits, then for Unigram the byte pieces of
    the ASCII characters (byte fallback requires all 256)."""
    check_sentencepiece_exportable(tokenizer)
    unigram = tokenizer.segmenter == "viterbi"
    pieces = []
    extra_bytes = []
    for token_id, token in enumerate(tokenizer.vocab):
        if len(token) == 1 and (not unigram or token[0] >= 0x80 or token[0] == 0):
            # BPE spells every lone byte as a byte piece: SentencePiece's BPE joins pieces by
            # their text, whatever its parts, and byte fallback gives a lone byte its id.
            pieces.append(_piece(f"<0x{token[0]:02X}>", 0.0, BYTE))
        else:
            # Unigram needs ASCII characters as scored pieces (an unknown one would take the
            # unknown piece's score); their byte pieces, which byte fallback requires to exist,
            # come after every polytok id and are never used.
            score = float(tokenizer.scores[token_id]) if unigram else -float(token_id)
            pieces.append(_piece(token.decode("utf-8"), score, NORMAL))
            if len(token) == 1:
                extra_bytes.append(_piece(f"<0x{token[0]:02X}>", 0.0, BYTE))
    by_id = {token_id: text for text, token_id in tokenizer.special_tokens.items()}
    if sorted(by_id) != list(range(len(tokenizer.vocab), len(tokenizer.vocab) + len(by_id))):
        raise ConfigError("special ids must follow the ordinary ids without gaps to be SentencePiece pieces")
    pieces.extend(_piece(by_id[token_id], 0.0, USER_DEFINED) for token_id in sorted(by_id))
    unk_id = len(pieces)
    pieces.append(_piece("<unk>", 0.0, UNKNOWN))
    pieces.extend(extra_bytes)
    trainer = (
        field_int(3, UNIGRAM if unigram else BPE)
        + field_int(4, len(pieces))
        + field_int(35, 1)  # byte_fallback
        + field_int(40, unk_id)
        + field_int(41, -1)  # no bos
        + field_int(42, -1)  # no eos
        + field_int(43, -1)  # no pad
    )
    normalizer = (
        field_bytes(1, b"identity")
        + field_int(3, 0)  # add_dummy_prefix
        + field_int(4, 0)  # remove_extra_whitespaces
        + field_int(5, 0)  # escape_whitespaces
    )
    return b"".join(field_bytes(1, piece) for piece in pieces) + field_bytes(2, trainer) + field_bytes(3, normalizer)


def appended_pieces(data: bytes, pieces: list[tuple[str, float, int]], *, byte_fallback: bool = False) -> bytes:
    """The serialised ModelProto `data` with `pieces` (text, score, type) after its own, so they
    take the next ids (a repeated field's values are read in the order they come), and with
    trainer_spec.byte_fallback set when `byte_fallback` (a message field given twice is merged)."""
    tail = b"".join(field_bytes(1, _piece(text, score, kind)) for text, score, kind in pieces)
    return data + tail + (field_bytes(2, field_int(35, 1)) if byte_fallback else b"")


def save_sentencepiece(tokenizer: Any, path: str | Path) -> None:
    """Writes `tokenizer` as a SentencePiece `.model` that encodes to its ids (special-token
    text recognised, as `encode(text, allowed_special="all")`), atomically; ConfigError, and no
    file, when the format cannot hold it. A tokeniser read from a `.model` (or extended from
    one) is written back as that model."""
    data = getattr(getattr(tokenizer, "pipeline", None), "data", None)
    write_atomically(path, data if isinstance(data, bytes) else sentencepiece_model(tokenizer))
