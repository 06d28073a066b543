"""SentencePiece `.model` files (BPE and Unigram), read without the sentencepiece package: a small
protobuf wire-format reader takes the fields of sentencepiece_model.proto that encoding needs.

Encoding follows SentencePiece exactly: its normaliser (the precompiled charsmap, longest rule
first; whitespace removal; `▁` for spaces; the dummy prefix), user-defined pieces kept whole,
then BPE by piece score or Unigram's Viterbi, and unknown pieces as their bytes when the model
has byte fallback. Decoding follows its decoder too (control pieces vanish, `<unk>` shows as
" ⁇ ", the dummy prefix space goes).
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from polytok import _core
from polytok.errors import EncodeError, FormatError
from polytok.formats.huggingface.normalizers import CharsMap
from polytok.formats.loaded import LoadedTokenizer, Pipeline, build_encoder

SPACE = "▁"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}


# ---- protobuf wire format ------------------------------------------------------------------

def _varint(data: bytes, at: int, source: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data):
            raise FormatError(f"{source}: the protobuf data ends inside a number; the file is truncated")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise FormatError(f"{source}: a protobuf number is longer than 10 bytes; the file is corrupt")


def parse_message(data: bytes, source: str) -> dict[int, list[Any]]:
    """Field number -> values in order: ints for varint fields, bytes for length-delimited ones,
    4- and 8-byte fields as raw bytes."""
    fields: dict[int, list[Any]] = {}
    at = 0
    while at < len(data):
        key, at = _varint(data, at, source)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise FormatError(f"{source}: protobuf field number 0 at byte {at}; the file is not a SentencePiece model")
        if wire == 0:
            value, at = _varint(data, at, source)
        elif wire == 1:
            value, at = data[at : at + 8], at + 8
        elif wire == 2:
            length, at = _varint(data, at, source)
            value, at = data[at : at + length], at + length
        elif wire == 5:
            value, at = data[at : at + 4], at + 4
        else:
            raise FormatError(f"{source}: protobuf wire type {wire} (field {number}) is not valid; the file is corrupt")
        if at > len(data):
            raise FormatError(f"{source}: field {number} runs past the end of the data; the file is truncated")
        fields.setdefault(number, []).append(value)
    return fields


def _last(fields: dict[int, list[Any]], number: int, default: Any) -> Any:
    return fields[number][-1] if number in fields else default


def _text(value: Any, field: str, source: str) -> str:
    try:
        return bytes(value).decode("utf-8")
    except (UnicodeDecodeError, TypeError):
        raise FormatError(f"{source}: {field} is not UTF-8 text") from None


def read_model(data: bytes, source: str) -> dict[str, Any]:
    """The fields of a ModelProto that encoding and decoding need."""
    model = parse_message(data, source)
    if 1 not in model:
        raise FormatError(f"{source}: no pieces (field 1); not a SentencePiece model")
    pieces = []
    for index, raw in enumerate(model[1]):
        if not isinstance(raw, bytes):
            raise FormatError(f"{source}: pieces[{index}] is not a message")
        fields = parse_message(raw, f"{source} pieces[{index}]")
        piece = _text(_last(fields, 1, b""), f"pieces[{index}].piece", source)
        score_raw = _last(fields, 2, b"\0\0\0\0")
        if not isinstance(score_raw, bytes) or len(score_raw) != 4:
            raise FormatError(f"{source}: pieces[{index}].score is not a 32-bit float")
        kind = _last(fields, 3, NORMAL)
        if kind not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
            raise FormatError(f"{source}: pieces[{index}].type is {kind}, not a SentencePiece piece type")
        if not piece:
            raise FormatError(f"{source}: pieces[{index}].piece is empty")
        pieces.append((piece, struct.unpack("<f", score_raw)[0], kind))
    trainer = parse_message(_last(model, 2, b""), f"{source} trainer_spec")
    normalizer = parse_message(_last(model, 3, b""), f"{source} normalizer_spec")
    unk_surface = _last(trainer, 44, None)
    return {
        "pieces": pieces,
        "model_type": _last(trainer, 3, UNIGRAM),
        "byte_fallback": bool(_last(trainer, 35, 0)),
        "treat_whitespace_as_suffix": bool(_last(trainer, 24, 0)),
        "unk_surface": " \u2047 " if unk_surface is None else _text(unk_surface, "trainer_spec.unk_surface", source),
        "normalizer_name": _text(_last(normalizer, 1, b""), "normalizer_spec.name", source),
        "precompiled_charsmap": bytes(_last(normalizer, 2, b"")),
        "add_dummy_prefix": bool(_last(normalizer, 3, 1)),
        "remove_extra_whitespaces": bool(_last(normalizer, 4, 1)),
        "escape_whitespaces": bool(_last(normalizer, 5, 1)),
    }


# ---- the pipeline ----------------------------------------------------------------------------

class SentencePiecePipeline(Pipeline):
    """SentencePiece's normaliser and decoder around polytok's segmenter."""

    def __init__(self, spec: dict[str, Any], source: str, *, lossy: list[str], components: dict[str, Any]):
        super().__init__(kind="SentencePiece model", added=[], lossy=lossy, components=components)
        self.spec = spec
        if spec["precompiled_charsmap"]:
            CharsMap(spec["precompiled_charsmap"], f"{source} normalizer_spec.precompiled_charsmap")  # checks its header
        user_defined = [(piece.encode("utf-8"), index) for index, (piece, _, kind) in enumerate(spec["pieces"]) if kind == USER_DEFINED]
        # The whole encoding (normaliser, user-defined pieces, segmenter) runs in one core call.
        self.normalizer_core = _core.SentencePieceNormalizer(
            spec["precompiled_charsmap"], user_defined,
            spec["add_dummy_prefix"], spec["remove_extra_whitespaces"], spec["escape_whitespaces"],
        )

    def encode(self, encoder: Any, text: str | bytes, split_added: bool = True) -> list[int]:
        """The ids `SentencePieceProcessor.encode` gives, the whole pipeline in one core call."""
        return encoder.encode_sentencepiece(self.normalizer_core, _utf8(text).encode("utf-8", "surrogatepass"))

    def encode_batch(
        self, encoder: Any, texts: list[str | bytes], num_threads: int | None, split_added: bool = True
    ) -> list[list[int]]:
        """`encode` of each text, the whole pipeline in the core, in parallel on `num_threads`
        (SentencePiece has no added-token stage: `split_added` changes nothing)."""
        return encoder.encode_sentencepiece_batch(self.normalizer_core, [_utf8(text) for text in texts], num_threads)

    def decode(self, ids: list[int]) -> str:
        """SentencePiece's DecodeIds."""
        spec = self.spec
        pieces = spec["pieces"]
        strip_first = spec["add_dummy_prefix"] or spec["remove_extra_whitespaces"]
        out: list[str] = []
        pending = bytearray()
        first = True

        def flush() -> None:
            nonlocal first
            if pending:
                out.append(pending.decode("utf-8", "replace"))
                pending.clear()
                first = first and not out[-1]

        for token_id in ids:
            piece, _, kind = pieces[token_id]
            if kind == BYTE:
                pending.append(int(piece[3:5], 16))
                continue
            flush()
            if kind == CONTROL:
                continue
            consumed_space = False
            if kind == UNKNOWN:
                surface = spec["unk_surface"]
            else:
                # the first piece loses its leading "▁"; when extra whitespace is removed, so do
                # all leading pieces that are only "▁"
                if first and strip_first and piece.startswith(SPACE):
                    piece = piece[len(SPACE) :]
                    consumed_space = not spec["remove_extra_whitespaces"]
                surface = piece.replace(SPACE, " ")
            out.append(surface)
            if surface or consumed_space:
                first = False
        flush()
        return "".join(out)


def _utf8(text: str | bytes) -> str:
    """`text` as str; bytes must be UTF-8 (a SentencePiece model encodes text)."""
    if isinstance(text, str):
        return text
    try:
        return bytes(text).decode("utf-8")
    except (UnicodeDecodeError, TypeError) as error:
        raise EncodeError(f"a tokeniser loaded from a SentencePiece model encodes text; the bytes given are not UTF-8 ({error})") from None


# ---- loading ---------------------------------------------------------------------------------

def load_sentencepiece(path: str | Path) -> LoadedTokenizer:
    """Reads a SentencePiece `.model` (BPE or Unigram); encodes to the ids
    `SentencePieceProcessor.encode` gives and decodes as it decodes."""
    try:
        data = Path(path).read_bytes()
    except OSError as error:
        raise FormatError(f"cannot read SentencePiece model {path}: {error.strerror}") from None
    return tokenizer_from_sentencepiece(data, f"SentencePiece model {path}")


def tokenizer_from_sentencepiece(data: bytes, source: str) -> LoadedTokenizer:
    """Builds the tokeniser of a serialised ModelProto."""
    spec = read_model(data, source)
    model_type = spec["model_type"]
    if model_type not in (UNIGRAM, BPE):
        raise FormatError(f"{source}: trainer_spec.model_type is {MODEL_TYPES.get(model_type, model_type)!r}; polytok reads unigram and bpe models")
    if spec["treat_whitespace_as_suffix"]:
        raise FormatError(f"{source}: trainer_spec.treat_whitespace_as_suffix is not supported")
    pieces = spec["pieces"]
    kinds = [kind for _, _, kind in pieces]
    unk = next((index for index, kind in enumerate(kinds) if kind == UNKNOWN), None)
    if unk is None:
        raise FormatError(f"{source}: no piece has type UNKNOWN; every SentencePiece model has one")
    vocab = []
    byte_tokens = []
    for index, (piece, _, kind) in enumerate(pieces):
        if kind == BYTE:
            if not (len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">")):
                raise FormatError(f"{source}: pieces[{index}] {piece!r} has type BYTE but is not <0xXX>")
            try:
                byte = int(piece[3:5], 16)
            except ValueError:
                raise FormatError(f"{source}: pieces[{index}] {piece!r} has type BYTE but is not <0xXX>") from None
            byte_tokens.append((byte, index))
            vocab.append(bytes([byte]))
        else:
            vocab.append(piece.encode("utf-8"))
    lossy = [] if spec["byte_fallback"] else [f"characters outside the vocabulary become {pieces[unk][0]!r}"]
    if spec["precompiled_charsmap"]:
        lossy.append(f"normaliser {spec['normalizer_name'] or 'precompiled'} maps different texts to the same ids")
    if spec["remove_extra_whitespaces"]:
        lossy.append("runs of spaces become one space, leading and trailing spaces go")
    in_model = [index for index, kind in enumerate(kinds) if kind in (NORMAL, USER_DEFINED)]
    if model_type == UNIGRAM:
        normal_scores = [score for _, score, kind in pieces if kind == NORMAL]
        minimum = min(normal_scores) if normal_scores else 0.0
        lattice = [(pieces[index][0].encode("utf-8"), index, pieces[index][1]) for index in in_model if kinds[index] == NORMAL]
        arguments = dict(pattern=None, tokens=vocab, lattice=lattice, byte_tokens=byte_tokens, byte_fallback=spec["byte_fallback"],
                         unk=unk, fuse_unk=True, unk_score=float(struct.unpack("<f", struct.pack("<f", minimum - 10.0))[0]),
                         single_precision=True)
        segmenter, algorithm = "char_viterbi", "unigram"
    else:
        # BPE joins the adjacent pair whose join is the piece of highest score, leftmost first:
        # a pair's rank is its join's place in score order (equal scores share a rank).
        ids = {pieces[index][0]: index for index in in_model}
        ranks = {score: rank for rank, score in enumerate(sorted({pieces[index][1] for index in in_model}, reverse=True))}
        merges = []
        for index in sorted(in_model, key=lambda index: (ranks[pieces[index][1]], index)):
            piece = pieces[index][0]
            for cut in range(1, len(piece)):
                left, right = ids.get(piece[:cut]), ids.get(piece[cut:])
                if left is not None and right is not None:
                    merges.append((left, right, index, ranks[pieces[index][1]]))
        arguments = dict(pattern=None, tokens=vocab, strings=[(pieces[index][0].encode("utf-8"), index) for index in in_model],
                         merges=[(left, right, merged) for left, right, merged, _ in merges], byte_tokens=byte_tokens,
                         byte_fallback=spec["byte_fallback"], unk=unk, fuse_unk=True, byte_symbols=False, ignore_merges=False,
                         merge_ranks=[rank for *_, rank in merges])
        segmenter, algorithm = "char_merges", "bpe"
    components = {
        "model": MODEL_TYPES[model_type],
        "normalizer": spec["normalizer_name"] or None,
        "add_dummy_prefix": spec["add_dummy_prefix"],
        "remove_extra_whitespaces": spec["remove_extra_whitespaces"],
        "escape_whitespaces": spec["escape_whitespaces"],
        "byte_fallback": spec["byte_fallback"],
    }
    pipeline = SentencePiecePipeline(spec, source, lossy=lossy, components=components)
    encoder = build_encoder(segmenter, arguments, source)
    return LoadedTokenizer(vocab, pipeline, encoder, algorithm=algorithm, segmenter=segmenter)
