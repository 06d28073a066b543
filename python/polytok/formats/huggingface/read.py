"""Reading a HF `tokenizer.json`: BPE, WordPiece and Unigram files with their own normalisers,
pre-tokenisers, decoders and added tokens, encoding to the ids `tokenizers` gives and decoding
as it decodes (pipeline.py). A file shaped as polytok writes it (write.py) reads back as the
native Tokenizer. A byte-level BPE file without normaliser whose pre-tokeniser is one regex is
the fast path: the regex runs in the core (polytok's own pre-tokeniser) and the merges segmenter
is polytok's.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


from polytok import checks
from polytok._core import MAX_UNUSED_IDS
from polytok.errors import ConfigError, FormatError, PatternError
from polytok.files import read_json, shown
from polytok.formats.huggingface.decoders import Decoder, decoder as read_decoder
from polytok.formats.huggingface.nodes import Fail, int_field
from polytok.formats.huggingface.normalizers import Normalizer, normalizer as read_normalizer
from polytok.formats.huggingface.pre_tokenizers import (
    PreTokenizerStep,
    core_split,
    from_byte_level,
    pre_tokenizer as read_pre_tokenizer,
)
from polytok.formats.huggingface.write import CONTINUATION_TAG, MAX_WORD_CHARACTERS, as_tokenizers_reads_it
from polytok.formats.huggingface.pipeline import HuggingFacePipeline
from polytok.formats.loaded import LoadedTokenizer, build_encoder
from polytok.pretokenize import resolve_pattern
from polytok.tokenizer import Tokenizer

def load_huggingface(path: str | Path) -> Tokenizer | LoadedTokenizer:
    """Reads a HF `tokenizer.json` (BPE, WordPiece or Unigram with the components GPT-2, Llama,
    BERT and XLM-R files use); encodes to the ids `tokenizers` gives, decodes as it decodes."""
    return tokenizer_from_huggingface(read_json(path, "tokeniser file"), f"tokeniser file {path}")


@dataclass
class _File:
    """What the model readers need of a parsed tokenizer.json."""

    record: dict[str, Any]
    source: str
    fail: Fail
    model: dict[str, Any]
    model_type: str
    normalizer: Normalizer | None
    steps: list[PreTokenizerStep] | None  # the pre-tokeniser steps run in Python
    byte_level: bool  # the vocabulary is spelled in GPT-2's byte-level characters
    core_pattern: str | None  # the pre-tokeniser's regex, run in the core
    decoder: Decoder | None
    texts: dict[int, str]  # id -> the token as the file spells it
    scores: dict[int, float]  # Unigram's, as `tokenizers` reads them
    model_size: int  # ids below it are the model's, but for `gaps`; added tokens may follow
    gaps: frozenset[int]  # ids below model_size not in model.vocab (a BPE file's special ids may sit there)
    added: list[dict[str, Any]]
    vocab: list[bytes]
    decode_texts: list[str]
    byte_tokens: list[tuple[int, int]]  # (byte, id) of the <0xXX> tokens of a byte-fallback model
    lossy: list[str]

    def model_strings(self) -> list[tuple[bytes, int]]:
        """(text, id) of each model token, as the segmenter looks words up (not the added
        tokens whose ids sit in gaps of model.vocab: the model does not know them)."""
        return [(self.vocab[token_id] if self.byte_level else self.texts[token_id].encode("utf-8"), token_id)
                for token_id in range(self.model_size) if token_id not in self.gaps]

    def components(self) -> dict[str, Any]:
        """The component types, for `info`."""
        return {
            "model": self.model_type,
            "normalizer": _describe(self.record.get("normalizer"), "normalizers"),
            "pre_tokenizer": _describe(self.record.get("pre_tokenizer"), "pretokenizers"),
            "decoder": _describe(self.record.get("decoder"), "decoders"),
        }

    def unk_id(self, name: str | None) -> int | None:
        """The id of the model's unknown token `name`, if it has one."""
        if name is None:
            return None
        if not isinstance(name, str):
            raise self.fail(f"model.unk_token is {shown(name)}, expected a string")
        vocab = self.model.get("vocab")
        found = vocab.get(name) if isinstance(vocab, dict) else None
        if found is None:
            raise self.fail(f"model.unk_token {name!r} is not in model.vocab")
        return found

    def loaded(self, segmenter: str, arguments: dict[str, Any], algorithm: str, *, pattern: str | None = None,
               merges: list[tuple[int, int]] | None = None, continuation_marker: str | None = None,
               steps: list[PreTokenizerStep] | None = None, normalizer: Normalizer | None = None) -> LoadedTokenizer:
        """The tokeniser that runs this file's pipeline around the core encoder `segmenter`."""
        pipeline = HuggingFacePipeline(record=self.record, added=self.added, normalizer=normalizer, pre_tokenizer=steps,
                                       decoder=self.decoder, token_texts=self.decode_texts, lossy=self.lossy,
                                       components=self.components())
        encoder = build_encoder(segmenter, arguments, self.source)
        return LoadedTokenizer(self.vocab, pipeline, encoder, algorithm=algorithm, segmenter=segmenter, pattern=pattern,
                               merges=merges, continuation_marker=continuation_marker)


def tokenizer_from_huggingface(record: Any, source: str) -> Tokenizer | LoadedTokenizer:
    """Builds the tokeniser of a parsed tokenizer.json; FormatError names the unsupported
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
    normalizer = None if record.get("normalizer") is None else read_normalizer(record["normalizer"], "normalizer", fail, lossy)
    steps: list[PreTokenizerStep] | None = None
    byte_level = False
    if record.get("pre_tokenizer") is not None:
        steps, byte_level = read_pre_tokenizer(record["pre_tokenizer"], "pre_tokenizer", fail)
    decoder = None if record.get("decoder") is None else read_decoder(record["decoder"], "decoder", fail)
    split = core_split(record.get("pre_tokenizer"))
    core_pattern = None
    if split is not None:
        steps, core_pattern = split

    texts, scores = _model_texts(model, model_type, fail)
    model_size = max(texts) + 1 if texts else 0
    if model_size - len(texts) > MAX_UNUSED_IDS:  # checked before the largest id sizes any list
        first = next(expected for expected, token_id in enumerate(sorted(texts)) if token_id != expected)
        raise fail(f"no token has id {first}; model.vocab leaves {model_size - len(texts)} ids free below its largest "
                   f"id {model_size - 1}, and at most {MAX_UNUSED_IDS} may be")
    gaps = frozenset(range(model_size)) - texts.keys()
    added = _added_tokens(record, texts, model_size, fail)
    size = max(texts) + 1 if texts else 0
    missing = next((token_id for token_id in range(size) if token_id not in texts), None)
    if missing is not None and (model_type != "BPE" or missing >= model_size):
        raise fail(f"no token has id {missing}; ids must run from 0 without gaps")
    if not size:
        raise fail("the vocabulary is empty")
    token_texts = [texts.get(token_id, "") for token_id in range(size)]
    byte_tokens = _byte_tokens(token_texts) if model.get("byte_fallback") else []
    file = _File(
        record=record, source=source, fail=fail, model=model, model_type=model_type, normalizer=normalizer,
        steps=steps, byte_level=byte_level, core_pattern=core_pattern, decoder=decoder, texts=texts, scores=scores,
        model_size=model_size, gaps=gaps, added=added,
        vocab=_vocab(token_texts, byte_tokens, byte_level, model_size, gaps, fail),
        decode_texts=_decode_texts(token_texts, added, normalizer), byte_tokens=byte_tokens, lossy=lossy,
    )
    # A Unigram piece spelled as the special token of its id only holds the special's place (HF
    # cuts special tokens out before the model runs): natively, an unused id.
    held = frozenset(token["id"] for token in added if model_type == "Unigram" and token.get("special")
                     and token["id"] < model_size and texts.get(token["id"]) == token["content"])
    if model_type in ("WordPiece", "Unigram") and normalizer is None and _plain_specials(added, model_size, gaps | held):
        # what polytok writes for its WordPiece and Unigram reads back as the native tokeniser
        model_scores = [float(entry[1]) for entry in model["vocab"]] if model_type == "Unigram" else None
        native_texts = ["" if token_id in held else text for token_id, text in enumerate(token_texts[:model_size])]
        native = _native_subword(record, native_texts, model_scores, {token["content"]: token["id"] for token in added})
        if native is not None:
            return native
    if model_type == "BPE":
        return _bpe(file)
    if model_type == "WordPiece":
        return _wordpiece(file)
    return _unigram(file)


def _model_texts(model: dict[str, Any], model_type: str, fail: Fail) -> tuple[dict[int, str], dict[int, float]]:
    """id -> text of the model's vocabulary, and Unigram's scores as `tokenizers` reads them."""
    texts: dict[int, str] = {}
    scores: dict[int, float] = {}
    if model_type == "Unigram":
        entries = model.get("vocab")
        if not isinstance(entries, list):
            raise fail("model.vocab is not a list of [piece, score]")
        for index, entry in enumerate(entries):
            if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)
                    and checks.is_number(entry[1])):
                raise fail(f"model.vocab[{index}] is {shown(entry)}, expected [piece, finite score]")
            texts[index] = entry[0]
            scores[index] = as_tokenizers_reads_it(float(entry[1]))
        return texts, scores
    raw_vocab = model.get("vocab")
    if not isinstance(raw_vocab, dict):
        raise fail("model.vocab is not an object")
    for text, token_id in raw_vocab.items():
        if not checks.is_integer(token_id) or token_id < 0 or token_id in texts:
            raise fail(f"model.vocab[{shown(text)}] has id {shown(token_id)}; ids must be distinct non-negative integers")
        texts[token_id] = text
    return texts, scores


def _added_tokens(record: dict[str, Any], texts: dict[int, str], model_size: int, fail: Fail) -> list[dict[str, Any]]:
    """The file's added tokens, checked; those with ids beyond the model's join `texts`."""
    added: list[dict[str, Any]] = []
    if not isinstance(record.get("added_tokens") or [], list):
        raise fail("added_tokens is not a list")
    for index, token in enumerate(record.get("added_tokens") or []):
        if not isinstance(token, dict) or not isinstance(token.get("content"), str) or not token["content"] \
                or isinstance(token.get("id"), bool) or not isinstance(token.get("id"), int) or token["id"] < 0:
            raise fail(f"added_tokens[{index}] is not a token with an 'id' and a non-empty 'content'")
        if token.get("single_word"):
            raise fail(f"added_tokens[{index}] ({token['content']!r}) has single_word true, which is not supported")
        if texts.setdefault(token["id"], token["content"]) != token["content"] and token["id"] >= model_size:
            raise fail(f"added_tokens[{index}] reuses id {token['id']}")
        added.append(token)
    return added


def _decode_texts(token_texts: list[str], added: list[dict[str, Any]], normalizer: Normalizer | None) -> list[str]:
    """Each token's text as decoders see it. HF decodes an added token to its content (normalised
    if the token is matched normalised), even where the model's vocabulary has the id."""
    decode_texts = list(token_texts)
    for token in added:
        normalized = token.get("normalized") and normalizer is not None
        decode_texts[token["id"]] = normalizer(token["content"]) if normalized else token["content"]
    return decode_texts


def _byte_tokens(token_texts: list[str]) -> list[tuple[int, int]]:
    """(byte, id) of a byte-fallback model's byte tokens, in the spelling HF looks them up by:
    "<0x" two upper-case hex digits ">"."""
    return [(int(text[3:5], 16), token_id) for token_id, text in enumerate(token_texts)
            if len(text) == 6 and _is_hex(text[3:5]) and text == f"<0x{int(text[3:5], 16):02X}>"]


def _vocab(token_texts: list[str], byte_tokens: list[tuple[int, int]], byte_level: bool, model_size: int,
           gaps: frozenset[int], fail: Fail) -> list[bytes]:
    """The bytes each id decodes to: a byte token's byte, a byte-level model token's bytes, or
    the token's text as UTF-8 (empty for an id no token has)."""
    byte_of = {token_id: byte for byte, token_id in byte_tokens}
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
        if not vocab[-1] and token_id not in gaps:
            raise fail(f"token {token_id} is empty")
    return vocab


# ---- the three models ---------------------------------------------------------------------------

def _bpe(file: _File) -> Tokenizer | LoadedTokenizer:
    """BPE: polytok's own tokeniser for a file shaped as polytok writes it, polytok's merges
    segmenter behind the file's pipeline for other byte-level files with one core regex, and
    the character-level BPE of the core for the rest."""
    model, fail = file.model, file.fail
    for option in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(option):
            raise fail(f"model.{option} {model[option]!r} is not supported")
    if model.get("dropout"):
        raise fail("model.dropout is set; BPE dropout makes HF's ids random")
    merges = _merges(file)
    unk = file.unk_id(model.get("unk_token"))
    if unk is not None:
        file.lossy.append(f"characters outside the vocabulary become the unknown token {model['unk_token']!r}")
    model_vocab = [b"" if token_id in file.gaps else token for token_id, token in enumerate(file.vocab[: file.model_size])]
    model_tokens = set(model_vocab)
    all_bytes = file.byte_level and all(bytes([byte]) in model_tokens for byte in range(256))
    one_regex = all_bytes and not model.get("ignore_merges") and file.core_pattern is not None and not file.steps \
        and file.normalizer is None and unk is None
    pairs = [(left, right) for left, right, _ in merges]
    if one_regex:
        if _plain_specials(file.added, file.model_size, file.gaps) and _decodes_bytes(file.record.get("decoder")):
            # What polytok writes: nothing HF-specific is left, so this is a native tokeniser
            # (special tokens need allowed_special, it saves as polytok JSON, it samples).
            specials = {token["content"]: token["id"] for token in file.added}
            try:
                return Tokenizer(model_vocab, segmenter="merges", pattern=file.core_pattern,
                                 special_tokens=specials, merges=pairs, algorithm="bpe")
            except (ConfigError, PatternError) as error:
                raise FormatError(f"{file.source}: {error}") from None
    if one_regex:
        # the fast path: polytok's own merges segmenter, the regex in the core (gaps are unused ids)
        try:
            pattern = resolve_pattern(file.core_pattern)
        except PatternError as error:
            raise FormatError(f"{file.source}: {error}") from None
        return file.loaded("merges", dict(pattern=pattern, vocab=file.vocab, merges=pairs), "bpe",
                           pattern=pattern, merges=pairs)
    # an added token may hold a gap of model.vocab (an extended file's, whose new tokens follow them)
    free = file.gaps - {token["id"] for token in file.added}
    if free:
        raise fail(f"no token has id {min(free)}; ids must run from 0 without gaps (only a byte-level BPE "
                   "file whose pre-tokeniser is one regex may leave ids free)")
    arguments = dict(
        pattern=file.core_pattern, tokens=file.vocab, strings=file.model_strings(), merges=merges,
        byte_tokens=file.byte_tokens, byte_fallback=bool(model.get("byte_fallback")), unk=unk,
        fuse_unk=bool(model.get("fuse_unk")), byte_symbols=file.byte_level,
        ignore_merges=bool(model.get("ignore_merges")), merge_ranks=None,
    )
    return file.loaded("char_merges", arguments, "bpe", steps=file.steps, normalizer=file.normalizer)


def _merges(file: _File) -> list[tuple[int, int, int]]:
    """(left, right, merged) ids of model.merges, in order."""
    ids_of = {text: token_id for token_id, text in file.texts.items() if token_id < file.model_size and token_id not in file.gaps}
    merges = []
    if not isinstance(file.model.get("merges") or [], list):
        raise file.fail("model.merges is not a list")
    for index, merge in enumerate(file.model.get("merges") or []):
        pair = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(part, str) for part in pair):
            raise file.fail(f"model.merges[{index}] is {shown(merge)}, expected two tokens")
        left, right, merged = ids_of.get(pair[0]), ids_of.get(pair[1]), ids_of.get(pair[0] + pair[1])
        if left is None or right is None or merged is None:
            raise file.fail(f"model.merges[{index}] ({shown(merge)}) names a token outside model.vocab")
        merges.append((left, right, merged))
    return merges


def _wordpiece(file: _File) -> LoadedTokenizer:
    """WordPiece: the core's character-level longest match, with the model's unknown token for
    words it cannot cut or that are too long."""
    model = file.model
    unk = file.unk_id(model.get("unk_token", "[UNK]"))
    if unk is None:
        raise file.fail("model.unk_token is missing; a WordPiece model needs one for words it cannot cut")
    prefix = model.get("continuing_subword_prefix", "##") or ""
    if not isinstance(prefix, str):
        raise file.fail(f"model.continuing_subword_prefix is {shown(prefix)}, expected a string")
    max_chars = int_field(model, "max_input_chars_per_word", 100, "model", file.fail, limit=2**63)
    file.lossy.append(f"words that cannot be cut, or longer than {max_chars} characters, become {model.get('unk_token', '[UNK]')!r}")
    arguments = dict(pattern=file.core_pattern, tokens=file.vocab, strings=file.model_strings(),
                     continuation=prefix.encode("utf-8"), max_chars=max_chars, unk=unk)
    return file.loaded("char_longest_match", arguments, "wordpiece", continuation_marker=prefix or None,
                       steps=file.steps, normalizer=file.normalizer)


def _unigram(file: _File) -> LoadedTokenizer:
    """Unigram: the core's character-level Viterbi over the scores as `tokenizers` reads them."""
    model, texts, scores = file.model, file.texts, file.scores
    unk = model.get("unk_id")
    if unk is not None and not (checks.is_integer(unk) and 0 <= unk < file.model_size):
        raise file.fail(f"model.unk_id {shown(unk)} is not an id of model.vocab")
    if unk is not None:
        file.lossy.append(f"characters outside the vocabulary become the unknown token {texts[unk]!r}")
    lattice = [(texts[token_id].encode("utf-8"), token_id, scores[token_id]) for token_id in range(file.model_size)]
    minimum = min(scores.values()) if scores else 0.0
    arguments = dict(pattern=file.core_pattern, tokens=file.vocab, lattice=lattice, byte_tokens=file.byte_tokens,
                     byte_fallback=bool(model.get("byte_fallback")), unk=unk, fuse_unk=True, unk_score=minimum - 10.0,
                     single_precision=False)
    return file.loaded("char_viterbi", arguments, "unigram", steps=file.steps, normalizer=file.normalizer)


def _native_subword(record: dict[str, Any], texts: list[str], scores: list[float] | None,
                    specials: dict[str, int]) -> Tokenizer | None:
    """The polytok WordPiece (longest_match) or Unigram (viterbi) tokeniser of a file shaped as
    huggingface_record writes it, or None for any other file."""
    pre_tokenizer = record.get("pre_tokenizer")
    plain_byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
    if pre_tokenizer == plain_byte_level:
        pattern = None
    else:
        split = core_split(pre_tokenizer)
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


def _plain_specials(added: list[dict[str, Any]], model_size: int, gaps: frozenset[int]) -> bool:
    """Whether every added token is a special token matched as-is, with an id no model token has."""
    return all(
        token.get("special") and not token.get("normalized") and not token.get("lstrip")
        and not token.get("rstrip") and (token["id"] >= model_size or token["id"] in gaps)
        for token in added
    )


def _decodes_bytes(decoder: Any) -> bool:
    """Whether decoding is joining the tokens' bytes: no decoder, or a plain ByteLevel one."""
    return decoder is None or (isinstance(decoder, dict) and decoder.get("type") == "ByteLevel")
