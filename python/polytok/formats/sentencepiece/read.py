"""Reading a SentencePiece `.model`: its ModelProto fields, and the pipeline that encodes and
decodes exactly as SentencePiece does (see the package docstring)."""
from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import Any

import numpy as np

from polytok import _core
from polytok.errors import EncodeError, FormatError
from polytok.formats.huggingface.normalizers import CharsMap
from polytok.formats.loaded import LoadedTokenizer, Pipeline, build_encoder
from polytok.formats.sentencepiece.proto import bytes_value, int_value, last_value, parse_message, text_value

SPACE = "▁"
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
UNIGRAM, BPE = 1, 2
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}
# A BYTE piece's spelling: "<0x", two upper-case hex digits, ">".
_BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>")


def read_model(data: bytes, source: str) -> dict[str, Any]:
    """The fields of a ModelProto that encoding and decoding need."""
    model = parse_message(data, source)
    if 1 not in model:
        raise FormatError(f"{source}: no pieces (field 1); not a SentencePiece model")
    pieces = []
    first_index: dict[str, int] = {}
    for index, raw in enumerate(model[1]):
        if not isinstance(raw, bytes):
            raise FormatError(f"{source}: pieces[{index}] is not a message")
        fields = parse_message(raw, f"{source} pieces[{index}]")
        piece = text_value(last_value(fields, 1, b""), f"pieces[{index}].piece", source)
        score_raw = last_value(fields, 2, b"\0\0\0\0")
        if not isinstance(score_raw, bytes) or len(score_raw) != 4:
            raise FormatError(f"{source}: pieces[{index}].score is not a 32-bit float")
        kind = int_value(last_value(fields, 3, NORMAL), f"pieces[{index}].type", source)
        if kind not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
            raise FormatError(f"{source}: pieces[{index}].type is {kind}, not a SentencePiece piece type")
        if not piece:
            raise FormatError(f"{source}: pieces[{index}].piece is empty")
        if piece in first_index:  # SentencePiece refuses such a model ("already defined")
            raise FormatError(f"{source}: pieces[{index}].piece {piece[:80]!r} is also pieces[{first_index[piece]}]")
        first_index[piece] = index
        pieces.append((piece, struct.unpack("<f", score_raw)[0], kind))
    # A message field given more than once is the merge of its parts (protobuf's rule), which is
    # the parse of their concatenation: an extension appends its changes so.
    trainer = parse_message(_joined(model, 2, "trainer_spec", source), f"{source} trainer_spec")
    normalizer = parse_message(_joined(model, 3, "normalizer_spec", source), f"{source} normalizer_spec")
    unk_surface = last_value(trainer, 44, None)

    def flag(fields: dict[int, list[Any]], number: int, default: int, name: str) -> bool:
        return bool(int_value(last_value(fields, number, default), name, source))

    return {
        "pieces": pieces,
        "model_type": int_value(last_value(trainer, 3, UNIGRAM), "trainer_spec.model_type", source),
        "byte_fallback": flag(trainer, 35, 0, "trainer_spec.byte_fallback"),
        "treat_whitespace_as_suffix": flag(trainer, 24, 0, "trainer_spec.treat_whitespace_as_suffix"),
        "unk_surface": " \u2047 " if unk_surface is None else text_value(unk_surface, "trainer_spec.unk_surface", source),
        "normalizer_name": text_value(last_value(normalizer, 1, b""), "normalizer_spec.name", source),
        "precompiled_charsmap": bytes_value(last_value(normalizer, 2, b""), "normalizer_spec.precompiled_charsmap", source),
        "add_dummy_prefix": flag(normalizer, 3, 1, "normalizer_spec.add_dummy_prefix"),
        "remove_extra_whitespaces": flag(normalizer, 4, 1, "normalizer_spec.remove_extra_whitespaces"),
        "escape_whitespaces": flag(normalizer, 5, 1, "normalizer_spec.escape_whitespaces"),
    }


def _joined(fields: dict[int, list[Any]], number: int, name: str, source: str) -> bytes:
    return b"".join(bytes_value(value, name, source) for value in fields.get(number, []))


# ---- the pipeline ----------------------------------------------------------------------------

class SentencePiecePipeline(Pipeline):
    """SentencePiece's normaliser and decoder around polytok's segmenter."""
    file_format = "sentencepiece"

    def __init__(self, spec: dict[str, Any], data: bytes, source: str, *, lossy: list[str], components: dict[str, Any]):
        super().__init__(kind="SentencePiece model", added=[], lossy=lossy, components=components)
        self.spec = spec
        self.data = data  # the serialised ModelProto, which save_sentencepiece writes back
        # read in Python too (checking its header), for the aligned normaliser of `offsets`
        self.charsmap = CharsMap(spec["precompiled_charsmap"], f"{source} normalizer_spec.precompiled_charsmap") \
            if spec["precompiled_charsmap"] else None
        user_defined = [(piece.encode("utf-8"), index) for index, (piece, _, kind) in enumerate(spec["pieces"]) if kind == USER_DEFINED]
        # the user-defined pieces, their lengths longest first, and the prefixes of up to 4
        # bytes they start with: a lookup costs the number of lengths, not of pieces
        self.user_defined = frozenset(piece for piece, _ in user_defined)
        self._user_defined_lengths = sorted({len(piece) for piece in self.user_defined}, reverse=True)
        self._user_defined_starts = frozenset(piece[:size] for piece in self.user_defined for size in range(1, 5))
        # each piece's kind, and the normalised bytes it stands for (a byte piece its byte)
        self._kinds = [kind for _, _, kind in spec["pieces"]]
        self._surfaces = [bytes([int(piece[3:5], 16)]) if kind == BYTE else piece.encode("utf-8") for piece, _, kind in spec["pieces"]]
        self._lengths = np.array([len(surface) for surface in self._surfaces], dtype=np.int64)
        # for offsets: where the normaliser may rewrite each character seen (see _changes), and
        # for those only longer rules start with, the following characters checked and those
        # that continue such a rule
        self._may_change: dict[str, str] = {}
        self._continued: dict[str, tuple[set[str], set[str]]] = {}
        self.known = frozenset(piece for piece, _, kind in spec["pieces"] if kind in (NORMAL, USER_DEFINED) and len(piece) == 1)
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

    def normalize_aligned(self, data: bytes) -> tuple[bytes, list[int]]:
        """SentencePiece's normaliser on UTF-8 `data` with its alignment: the normalised bytes
        and, for each of their positions and the end, the byte of `data` it comes from (the
        start of the input chunk whose rule or character produced it, the input's end after
        the last), as SentencePiece's Normalizer builds `norm_to_orig`."""
        spec = self.spec
        escape, remove = spec["escape_whitespaces"], spec["remove_extra_whitespaces"]
        space = SPACE.encode("utf-8") if escape else b" "
        at, size = 0, len(data)
        if remove:
            while at < size:
                replacement, length = self._normalize_prefix(data, at)
                if replacement != b" ":
                    break
                at += length
        if at == size:
            return b"", []
        out = bytearray()
        origin: list[int] = []
        if spec["add_dummy_prefix"]:
            out += space
            origin += [at] * len(space)
        previous_space = remove
        special = self._special_characters(data)
        while at < size:
            if special is not None:
                # a run of characters that are no space and start no rule is copied as it is
                match = special.search(data, at)
                stop = match.start() if match else size
                if stop > at:
                    out += data[at:stop]
                    if data[at:stop].isascii():
                        origin.extend(range(at, stop))
                    else:
                        for char in data[at:stop].decode("utf-8"):
                            width = len(char.encode("utf-8"))
                            origin.extend([at] * width)
                            at += width
                    at = stop
                    previous_space = False
                    continue
            replacement, length = self._normalize_prefix(data, at)
            if previous_space:
                replacement = replacement.lstrip(b" ")
            if replacement:
                for byte in replacement:
                    if escape and byte == 0x20:
                        out += space
                        origin += [at] * len(space)
                    else:
                        out.append(byte)
                        origin.append(at)
                previous_space = replacement.endswith(b" ")
            at += length
            if not remove:
                previous_space = False
        if remove:
            while out.endswith(space):
                cut = len(out) - len(space)
                at = origin[cut]
                del out[cut:], origin[cut:]
        origin.append(at)
        return bytes(out), origin

    def _special_characters(self, data: bytes) -> re.Pattern[bytes] | None:
        """A pattern of the places in UTF-8 `data` where the normaliser may change something: a
        space, a character a charsmap rule is or a user-defined piece starts with, and a
        character longer rules start with where the character after it continues one of them
        (None where `data` is not valid UTF-8: every position is then looked up)."""
        try:
            characters = set(data.decode("utf-8"))
        except UnicodeDecodeError:
            return None
        if len(self._may_change) > 100_000:  # distinct characters seen; bounded for hostile input
            self._may_change.clear()
            self._continued.clear()
        alternatives = []
        for char in sorted(characters):
            if char not in self._may_change:
                self._may_change[char] = self._changes(char)
            change = self._may_change[char]
            if change == "always":
                alternatives.append(re.escape(char.encode("utf-8")))
            elif change == "followed":
                checked, continuing = self._continued.setdefault(char, (set(), set()))
                encoded = char.encode("utf-8")
                for following in characters - checked:
                    if self.charsmap is not None and self.charsmap.may_start(encoded + following.encode("utf-8")):
                        continuing.add(following)
                checked.update(characters)
                followers = sorted(characters & continuing)
                if followers:
                    lookahead = b"|".join(re.escape(following.encode("utf-8")) for following in followers)
                    alternatives.append(re.escape(encoded) + b"(?=" + lookahead + b")")
        return re.compile(b"|".join(alternatives) if alternatives else b"(?!)")

    def _changes(self, char: str) -> str:
        """Where the normaliser may change `char`: "always" (a space, a rule for the character
        itself, a user-defined piece starting with it), "followed" (only rules longer than it
        start with it), or "never"."""
        encoded = char.encode("utf-8")
        if char == " " or encoded in self._user_defined_starts:
            return "always"
        if self.charsmap is None or not self.charsmap.may_start(encoded):
            return "never"
        if any(length == len(encoded) for length, _ in self.charsmap.prefix_matches(encoded, 0)):
            return "always"
        return "followed"

    def _normalize_prefix(self, data: bytes, at: int) -> tuple[bytes, int]:
        """What SentencePiece's NormalizePrefix makes of data[at:] and how many bytes it takes:
        the longest user-defined piece kept as it is, else the longest charsmap rule, else one
        character (an invalid byte as U+FFFD)."""
        for length in self._user_defined_lengths:
            if data[at : at + length] in self.user_defined:
                return data[at : at + length], length
        rule = None if self.charsmap is None else self.charsmap.longest_rule(data, at)
        if rule is not None:
            return rule
        lead = data[at]
        length = 1 if lead < 0x80 else 2 if lead >> 5 == 6 else 3 if lead >> 4 == 14 else 4 if lead >> 3 == 30 else 0
        chunk = data[at : at + length]
        try:
            if length and len(chunk) == length:
                chunk.decode("utf-8")
                return chunk, length
        except UnicodeDecodeError:
            pass
        return "\ufffd".encode("utf-8"), 1

    def offsets(self, encoder: Any, text: str | bytes) -> tuple[list[int], np.ndarray]:
        """The ids of `text` (as `encode` gives them) and each piece's (begin, end) in its UTF-8
        bytes, as `SentencePieceProcessor.encode(..., return_type="proto")` spans it:
        a piece covers the input chunks its normalised bytes came from (norm_to_orig at its
        start and at its end), so the dummy prefix is an empty span, a space piece covers the
        extra spaces removed after it, and a character a rule rewrote belongs to the last piece
        its output reaches (so the byte-fallback pieces of an unknown character are empty spans
        at its start but the last, which covers the whole character)."""
        ids = self.encode(encoder, text)
        data = _utf8(text).encode("utf-8", "surrogatepass")
        normalized, origin = self.normalize_aligned(data)
        if not any(self._kinds[token_id] == UNKNOWN for token_id in ids):
            # every piece's length is known: its text, or one byte
            if b"".join(self._surfaces[token_id] for token_id in ids) != normalized:
                raise EncodeError("the pieces do not spell the normalised text; cannot place them in the input")
            ends = np.cumsum(self._lengths[ids], dtype=np.int64) if ids else np.zeros(0, dtype=np.int64)
            bounds = np.array(origin, dtype=np.int64)[np.append(0, ends)] if ids else np.zeros(1, dtype=np.int64)
            return ids, np.stack([bounds[:-1], bounds[1:]], axis=1)
        pieces = self.spec["pieces"]
        result = np.zeros((len(ids), 2), dtype=np.int64)
        at = 0
        for index, token_id in enumerate(ids):
            piece, _, kind = pieces[token_id]
            if kind == UNKNOWN:
                following = pieces[ids[index + 1]] if index + 1 < len(ids) else None
                end = self._unknown_end(normalized, at, following)
            elif kind == BYTE:
                end = at + 1 if at < len(normalized) and normalized[at] == int(piece[3:5], 16) else -1
            else:
                end = at + len(piece.encode("utf-8"))
                if normalized[at:end] != piece.encode("utf-8"):
                    end = -1
            if end < 0:
                raise EncodeError(f"piece {token_id} {piece!r} does not spell the normalised text at byte {at}; cannot place it in the input")
            result[index] = (origin[at], origin[end])
            at = end
        if at != len(normalized):
            raise EncodeError("the pieces do not spell the whole normalised text; cannot place them in the input")
        return ids, result

    def _unknown_end(self, normalized: bytes, at: int, following: tuple[str, float, int] | None) -> int:
        """Where an unknown piece starting at byte `at` ends: after the run of characters that
        are no piece by themselves (SentencePiece fuses them), the longest that the next piece
        follows; -1 where none does."""
        text = normalized[at:].decode("utf-8", "replace")
        ends = []
        position = at
        for char in text:
            if char in self.known:
                break
            position += len(char.encode("utf-8"))
            ends.append(position)
        for end in reversed(ends):
            if following is None:
                if end == len(normalized):
                    return end
            elif following[2] == BYTE or normalized.startswith(following[0].encode("utf-8"), end):
                return end
        return -1

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
            if not _BYTE_PIECE.fullmatch(piece):
                raise FormatError(f"{source}: pieces[{index}] {piece[:80]!r} has type BYTE but is not <0xXX>")
            byte = int(piece[3:5], 16)
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
        if spec["byte_fallback"]:
            # SentencePiece joins pieces by their text, whatever their parts are; an ASCII
            # character that is no piece reaches the merges as its one byte piece, so the joins
            # it is part of apply to that byte piece (polytok's exported BPE spells all bytes so)
            for byte, index in byte_tokens:
                if byte < 0x80:
                    ids.setdefault(chr(byte), index)
        ranks = {score: rank for rank, score in enumerate(sorted({pieces[index][1] for index in in_model}, reverse=True))}
        # a cut's two sides are pieces, so only cuts at piece lengths are tried: a long piece
        # costs the number of distinct lengths, not its length squared
        ids_lengths = {len(text) for text in ids}
        lengths = sorted(ids_lengths)
        merges = []
        for index in sorted(in_model, key=lambda index: (ranks[pieces[index][1]], index)):
            piece = pieces[index][0]
            cuts = (cut for cut in lengths if cut < len(piece) and len(piece) - cut in ids_lengths)
            for cut in cuts:
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
    pipeline = SentencePiecePipeline(spec, data, source, lossy=lossy, components=components)
    encoder = build_encoder(segmenter, arguments, source)
    return LoadedTokenizer(vocab, pipeline, encoder, algorithm=algorithm, segmenter=segmenter)
