"""Hostile tokeniser files: every reader (polytok JSON, tiktoken ranks, HF tokenizer.json,
SentencePiece .model, .ptc counts) turns a crafted, edited or truncated file into one
FormatError naming the file, never a crash, another exception, a hang or a huge allocation.

Files are loaded (and, when they load, encoded) in a child process with an address-space limit,
so that an abort or an allocation the size of a number in the file fails the test instead of
taking pytest down; the child reports each file's outcome on a line of its own.
"""
from __future__ import annotations

import base64
import copy
import json
import struct
import subprocess
import sys
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import polytok
from polytok import PreTokenCounts, Tokenizer, _core
from polytok.errors import EncodeError, FormatError

READERS = Path(__file__).resolve().parents[1] / "data" / "readers"
HF_FILES = sorted(READERS.glob("hf-*.json"))
SP_FILES = sorted(READERS.glob("sp-*.model"))

# The child: reads [[kind, path], ...] as JSON on stdin, loads each file (and encodes a text
# with what loads), and prints one JSON line per file: the exception's class and message, or ok.
CHILD = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    import polytok
    for kind, path in json.load(sys.stdin):
        print(json.dumps({"path": path, "outcome": "started"}), flush=True)
        try:
            if kind == "counts":
                polytok.PreTokenCounts.load(path)
            else:
                tokenizer = polytok.load(path, pattern="cl100k" if kind == "tiktoken" else None)
                tokenizer.decode(tokenizer.encode("Hello world, hello 123 ∑ 中文 "))
            outcome, message = "ok", ""
        except polytok.Error as error:
            outcome, message = type(error).__name__, str(error)
        except BaseException as error:
            outcome, message = "not a polytok.Error: " + type(error).__name__, str(error)[:300]
        print(json.dumps({"path": path, "outcome": outcome, "message": message}), flush=True)
    """
)


def outcomes(files: list[tuple[str, Path]], timeout: float = 60) -> dict[str, tuple[str, str]]:
    """path -> (outcome, message) of loading each (kind, path) in one child process; fails the
    test if the child dies (an abort, a signal) or runs past `timeout`."""
    request = json.dumps([[kind, str(path)] for kind, path in files])
    try:
        done = subprocess.run([sys.executable, "-c", CHILD], input=request, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        lines = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else expired.stdout or ""
        pytest.fail(f"the child hung; last lines: {lines.splitlines()[-2:]}")
    results: dict[str, tuple[str, str]] = {}
    last = None
    for line in done.stdout.splitlines():
        entry = json.loads(line)
        last = entry["path"]
        if entry["outcome"] != "started":
            results[entry["path"]] = (entry["outcome"], entry["message"])
    if done.returncode != 0:
        pytest.fail(f"the child exited with {done.returncode} while loading {last}: {done.stderr[-2000:]}")
    assert len(results) == len(files)
    return results


def assert_format_errors(files: dict[Path, str], kind: str) -> None:
    """Each file (-> a word its message must hold, naming the field) loads as a FormatError that
    names the file."""
    results = outcomes([(kind, path) for path in files])
    wrong = []
    for path, field in files.items():
        outcome, message = results[str(path)]
        named = str(path) in message or repr(str(path)) in message
        if outcome != "FormatError" or not named or field not in message:
            wrong.append((path.name, field, outcome, message[:400]))
    assert not wrong, "\n".join(map(str, wrong))


def assert_survives(files: list[Path], kind: str) -> dict[str, tuple[str, str]]:
    """Each file loads (and encodes) or is a FormatError naming it; nothing else."""
    results = outcomes([(kind, path) for path in files])
    for path in files:
        outcome, message = results[str(path)]
        assert outcome in ("ok", "FormatError"), (path.name, outcome, message)
        if outcome == "FormatError":
            assert str(path) in message or repr(str(path)) in message, (path.name, message)
    return results


def truncations(data: bytes, pieces: int = 40) -> list[int]:
    """About `pieces` cut points spread over `data`, and the first and last few bytes."""
    step = max(1, len(data) // pieces)
    return sorted({*range(0, len(data), step), *range(min(8, len(data))), *range(max(0, len(data) - 8), len(data))})


def cut_files(directory: Path, data: bytes, cuts: Iterable[int], suffix: str) -> list[Path]:
    """`data` cut at each of `cuts`, one file each in `directory`."""
    files = []
    for cut in cuts:
        path = directory / f"cut-{cut}{suffix}"
        path.write_bytes(data[:cut])
        files.append(path)
    return files


# ---- polytok JSON ---------------------------------------------------------------------------------

def small_tokenizer() -> Tokenizer:
    vocab = [bytes([byte]) for byte in range(256)] + [b"he", b"hel", b"hell", b"hello", b" w", b" wo"]
    return Tokenizer(vocab, segmenter="merges", pattern="cl100k", special_tokens={"<|end|>": 262, "<|pad|>": 263})


def polytok_record() -> dict[str, Any]:
    return small_tokenizer().to_dict()


def edited(record: dict[str, Any], path: tuple, value: Any) -> dict[str, Any]:
    """A deep copy of `record` with the value at `path` (keys and indices) set to `value`."""
    record = copy.deepcopy(record)
    node = record
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return record


def test_the_special_id_that_aborted_the_process_is_a_format_error(tmp_path):
    files = {}
    for token_id in (4_000_000_000, 2**31 - 1, 2**32 - 1, 2**32, 2**64 + 5, 262 + 2 + 1024):
        path = tmp_path / f"special-{token_id}.json"
        path.write_text(json.dumps(edited(polytok_record(), ("special_tokens", "<|pad|>"), token_id)))
        files[path] = "dense"
    assert_format_errors(files, "polytok")


def test_the_gap_limit_is_the_cores_and_a_gap_within_it_loads(tmp_path):
    assert _core.MAX_UNUSED_IDS == 1024
    # 262 ordinary + 2 special ids leave at most 1024 unused: the largest id is 262 + 2 + 1023
    path = tmp_path / "gap.json"
    path.write_text(json.dumps(edited(polytok_record(), ("special_tokens", "<|pad|>"), 262 + 2 + 1023)))
    tokenizer = polytok.load(path)
    assert tokenizer.encode("<|pad|>", allowed_special="all") == [262 + 2 + 1023]
    assert tokenizer.n_vocab == 262 + 2 + 1024
    with pytest.raises(ValueError, match="too large"):
        _core.Encoder.merges(None, [bytes([byte]) for byte in range(256)], None, [(b"<x>", 256 + 1 + 1024)])


def test_a_gap_in_a_character_level_bpe_file_is_a_format_error(tmp_path):
    # found by the fuzzer: the gap was looked up before it was refused
    record = json.loads((READERS / "hf-bpe-llama.json").read_text(encoding="utf-8"))
    vocab = record["model"]["vocab"]
    lost = next(text for text, token_id in vocab.items() if token_id == 48)
    del vocab[lost]
    record["model"]["merges"] = [merge for merge in record["model"]["merges"] if lost not in merge]
    path = tmp_path / "gap.json"
    path.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(FormatError, match="no token has id 48; ids must run from 0 without gaps"):
        polytok.load(path)


def test_bad_polytok_fields_are_format_errors_naming_the_field(tmp_path):
    record = polytok_record()
    cases = {
        "negative-special": (("special_tokens", "<|end|>"), -1, "special_tokens"),
        "bool-special": (("special_tokens", "<|end|>"), True, "special_tokens"),
        "str-special": (("special_tokens", "<|end|>"), "262", "special_tokens"),
        "float-special": (("special_tokens", "<|end|>"), 262.0, "special_tokens"),
        "shared-special": (("special_tokens", "<|end|>"), 263, "share id 263"),
        "ordinary-special": (("special_tokens", "<|end|>"), 5, "special token"),
        "special-list": (("special_tokens",), [262], "special_tokens"),
        "vocab-dict": (("vocab",), {"a": 1}, "'vocab'"),
        "vocab-int": (("vocab", 3), 7, "'vocab'[3]"),
        "vocab-base64": (("vocab", 3), "!!!", "'vocab'[3]"),
        "vocab-empty": (("vocab", 3), "", "'vocab'[3]"),
        "vocab-repeated": (("vocab", 300 - 40), base64.b64encode(b"a").decode(), "repeats"),
        "version": (("version",), "1", "'version'"),
        "version-new": (("version",), 2, "'version'"),
        "segmenter": (("segmenter",), "magic", "'segmenter'"),
        "pattern": (("pattern",), 5, "'pattern'"),
        "pattern-regex": (("pattern",), "(unclosed", "regex"),
        "merges-dict": (("merges",), {"0": [1, 2]}, "'merges'"),
        "scores-text": (("scores",), ["x"] * 262, "'scores'"),
        "training-list": (("training",), [1], "'training'"),
    }
    files = {}
    for name, (path, value, field) in cases.items():
        target = tmp_path / f"{name}.json"
        target.write_text(json.dumps(edited(record, path, value)))
        files[target] = field
    # merge lists: out of range, negative, the wrong shape, a merge that makes no token
    merged = polytok_record()
    merged["vocab"] = merged["vocab"][:258]
    merged["special_tokens"] = {}
    for name, merges, field in [
        ("merge-range", [[104, 101], [258, 108]], "'merges'[1]"),
        ("merge-negative", [[104, -1]], "'merges'[0]"),
        ("merge-bool", [[True, 101]], "'merges'[0]"),
        ("merge-three", [[104, 101, 1]], "'merges'[0]"),
        ("merge-str", [["h", "e"]], "'merges'[0]"),
        ("merge-no-token", [[104, 101], [256, 120]], "merge 1"),
        ("merge-later-id", [[257, 108], [104, 101]], "merge 0"),
    ]:
        target = tmp_path / f"{name}.json"
        target.write_text(json.dumps(dict(merged, merges=merges)))
        files[target] = field
    for name, text, field in [
        ("score-inf", json.dumps(record).replace('"scores": null', '"scores": [' + ", ".join(["1e400"] * 262) + "]"), "'scores'[0]"),
        ("score-nan", json.dumps(record).replace('"scores": null', '"scores": [' + ", ".join(["NaN"] * 262) + "]"), "'scores'[0]"),
        ("score-huge-int", json.dumps(record).replace('"scores": null', '"scores": [' + ", ".join([str(10**400)] * 262) + "]"), "'scores'[0]"),
        ("digits", json.dumps(record).replace('"version": 1', '"version": ' + "9" * 5000), "digits"),
        ("deep", json.dumps(record).replace('"training": null', '"training": ' + "[" * 100_000 + "]" * 100_000), "deeply"),
        ("top-list", "[1, 2]", "not a tokeniser file"),
        ("repeated-key", json.dumps(record).replace('"<|end|>": 262', '"<|end|>": 262, "<|end|>": 264'), "appears twice"),
        ("truncated", json.dumps(record)[:-1], "not valid JSON"),
    ]:
        target = tmp_path / f"{name}.json"
        target.write_text(text)
        files[target] = field
    target = tmp_path / "latin1.json"
    target.write_bytes(json.dumps(record).encode() + b" \xff")
    files[target] = "UTF-8"
    assert_format_errors(files, "polytok")


def test_a_polytok_file_cut_anywhere_fails_cleanly(tmp_path):
    data = polytok.formats.polytok.dumps(polytok_record()).encode()
    files = cut_files(tmp_path, data, truncations(data[: len(data.rstrip())]), ".json")  # a cut before the closing brace
    results = assert_survives(files, "polytok")
    assert all(outcome == "FormatError" for outcome, _ in results.values())


# ---- tiktoken --------------------------------------------------------------------------------------

def tiktoken_text() -> str:
    return "".join(f"{base64.b64encode(token).decode()} {rank}\n" for rank, token in enumerate(small_tokenizer().vocab))


def test_bad_tiktoken_lines_are_format_errors_naming_the_line(tmp_path):
    lines = tiktoken_text().splitlines()
    cases = {
        "base64": (10, "!!!! 10", "line 11"),
        "rank-text": (10, "YQ== ten", "line 11"),
        "rank-negative": (10, "YQ== -10", "line 11"),
        "rank-twice": (10, lines[9], "line 11"),
        "rank-gap": (10, lines[10].split()[0] + " 4000000000", "missing"),
        "rank-digits": (10, "YQ== " + "9" * 5000, "line 11"),
        "three-fields": (10, lines[10] + " 3", "line 11"),
        "token-repeated": (300 - 40, "YQ== 260", "repeats"),
        "non-utf8": (10, "\udcff\udcfe 10", "line 11"),
    }
    files = {}
    for name, (index, line, field) in cases.items():
        edited_lines = list(lines)
        edited_lines[index] = line
        path = tmp_path / f"{name}.tiktoken"
        path.write_bytes("\n".join(edited_lines).encode("utf-8", "surrogateescape"))
        files[path] = field
    (tmp_path / "empty.tiktoken").write_text("\n\n")
    files[tmp_path / "empty.tiktoken"] = "no tokens"
    assert_format_errors(files, "tiktoken")


def test_a_tiktoken_file_cut_anywhere_fails_cleanly(tmp_path):
    data = tiktoken_text().encode()
    files = cut_files(tmp_path, data, truncations(data), ".tiktoken")
    assert_survives(files, "tiktoken")


def test_the_real_openai_vocabularies_still_load(tmp_path):
    from real_vocabularies import packaged_rank_files, unpack

    if packaged_rank_files() is None:
        pytest.skip("bpe-openai (test extra) carries the real rank files")
    paths = unpack(tmp_path)
    specials = {
        "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                        "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
        "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    }
    for name, path in paths.items():
        tokenizer = polytok.load_tiktoken(path, pattern=name.split("_")[0], special_tokens=specials[name])
        unused = tokenizer.n_vocab - tokenizer.vocab_size
        assert 0 < unused <= _core.MAX_UNUSED_IDS
        assert tokenizer.encode("<|endofprompt|>", allowed_special="all") == [specials[name]["<|endofprompt|>"]]


# ---- HF tokenizer.json ----------------------------------------------------------------------------

def hf_record(name: str) -> dict[str, Any]:
    return json.loads((READERS / name).read_text(encoding="utf-8"))


def nested(kind: str, children: str, leaf: dict[str, Any], depth: int) -> dict[str, Any]:
    node = leaf
    for _ in range(depth):
        node = {"type": "Sequence", children: [node]}
    return node


def test_bad_hf_fields_are_format_errors_naming_the_field(tmp_path):
    bpe, wordpiece, unigram = hf_record("hf-bpe-byte-level.json"), hf_record("hf-wordpiece.json"), hf_record("hf-unigram.json")
    size = len(bpe["model"]["vocab"])
    added = {"id": size, "content": "<x>", "special": True, "normalized": False, "lstrip": False, "rstrip": False,
             "single_word": False}
    cases: dict[str, tuple[dict[str, Any], str]] = {}
    for token_id in (4_000_000_000, 2**31 - 1, 2**64, size + 5):
        cases[f"added-{token_id}"] = (dict(bpe, added_tokens=[dict(added, id=token_id)]), "no token has id")
    for value in (-1, True, "5", None, 1.5):
        cases[f"added-id-{value}"] = (dict(bpe, added_tokens=[dict(added, id=value)]), "added_tokens[0]")
    cases["added-twice"] = (dict(bpe, added_tokens=[added, dict(added, content="<y>")]), "reuses id")
    cases["added-dict"] = (dict(bpe, added_tokens={"a": added}), "added_tokens")
    cases["added-int"] = (dict(bpe, added_tokens=5), "added_tokens")
    vocab = dict(bpe["model"]["vocab"])
    first = next(iter(vocab))
    for value in (-1, True, "0", 2**40, None):
        cases[f"vocab-id-{value}"] = (edited(bpe, ("model", "vocab", first), value), "id")
    cases["vocab-list"] = (edited(bpe, ("model", "vocab"), [first]), "model.vocab")
    merges = bpe["model"]["merges"]
    for name, merge in [("unknown", "zzzq qqqz"), ("one", "a"), ("lists", [[1], [2]]), ("ints", [1, 2]), ("none", None)]:
        cases[f"merge-{name}"] = (edited(bpe, ("model", "merges"), [merge, *merges[1:]]), "model.merges[0]")
    cases["merges-int"] = (edited(bpe, ("model", "merges"), 5), "model.merges")
    cases["model-type"] = (edited(bpe, ("model", "type"), "WordLevel"), "model type")
    cases["model-list"] = (dict(bpe, model=[1]), "model type")
    cases["wp-unk-list"] = (edited(wordpiece, ("model", "unk_token"), ["[UNK]"]), "model.unk_token")
    cases["wp-unk-missing"] = (edited(wordpiece, ("model", "unk_token"), "[NOPE]"), "model.unk_token")
    for value in ("abc", -1, 1e30, 2**70, True):
        cases[f"wp-max-chars-{value}"] = (edited(wordpiece, ("model", "max_input_chars_per_word"), value), "max_input_chars_per_word")
    cases["wp-prefix"] = (edited(wordpiece, ("model", "continuing_subword_prefix"), 5), "continuing_subword_prefix")
    for value in ("x", True, None):
        cases[f"unigram-score-{value}"] = (edited(unigram, ("model", "vocab", 3, 1), value), "model.vocab[3]")
    cases["unigram-entry"] = (edited(unigram, ("model", "vocab", 3), "x"), "model.vocab[3]")
    for value in (True, -1, 10**6, "0"):
        cases[f"unigram-unk-{value}"] = (edited(unigram, ("model", "unk_id"), value), "model.unk_id")
    cases["normalizer-deep"] = (dict(bpe, normalizer=nested("Sequence", "normalizers", {"type": "NFC"}, 40)), "nested")
    cases["pre-tokenizer-deep"] = (dict(bpe, pre_tokenizer=nested("Sequence", "pretokenizers", bpe["pre_tokenizer"], 40)), "nested")
    cases["decoder-deep"] = (dict(bpe, decoder=nested("Sequence", "decoders", {"type": "Fuse"}, 40)), "nested")
    cases["normalizer-type"] = (dict(bpe, normalizer={"type": "Magic"}), "normalizer type")
    cases["normalizer-untyped"] = (dict(bpe, normalizer=[1]), "normalizer")
    cases["metaspace-replacement"] = (dict(bpe, pre_tokenizer={"type": "Metaspace", "replacement": 5}), "replacement")
    cases["metaspace-empty"] = (dict(bpe, pre_tokenizer={"type": "Metaspace", "replacement": ""}), "replacement")
    # tokenizers reads a Metaspace replacement as one char; a long one multiplied every text's length
    cases["metaspace-long"] = (dict(unigram, pre_tokenizer={"type": "Metaspace", "replacement": "a" * 100_000}), "one character")
    cases["metaspace-decoder-long"] = (dict(unigram, decoder={"type": "Metaspace", "replacement": "ab"}), "one character")
    cases["metaspace-scheme"] = (dict(bpe, pre_tokenizer={"type": "Metaspace", "prepend_scheme": "sometimes"}), "prepend_scheme")
    cases["punctuation-behavior"] = (dict(bpe, pre_tokenizer={"type": "Punctuation", "behavior": 3}), "behavior")
    cases["split-regex"] = (dict(bpe, pre_tokenizer={"type": "Split", "pattern": {"Regex": "("}, "behavior": "Isolated"}), "regex")
    cases["strip-start"] = (dict(bpe, decoder={"type": "Strip", "content": " ", "start": "x", "stop": 0}), "decoder.start")
    cases["strip-content"] = (dict(bpe, decoder={"type": "Strip", "content": 1, "start": 1, "stop": 0}), "decoder.content")
    cases["strip-long"] = (dict(bpe, decoder={"type": "Strip", "content": "  ", "start": 1, "stop": 0}), "decoder.content")
    cases["replace-content"] = (dict(bpe, decoder={"type": "Replace", "pattern": {"String": "a"}, "content": 1}), "decoder.content")
    cases["wordpiece-prefix"] = (dict(bpe, decoder={"type": "WordPiece", "prefix": None}), "decoder.prefix")
    for name, blob in [("base64", "!!"), ("header", base64.b64encode(b"\x01").decode()),
                       ("size", base64.b64encode(struct.pack("<I", 2**32 - 4) + b"\0" * 8).decode()), ("type", 5)]:
        cases[f"precompiled-{name}"] = (dict(bpe, normalizer={"type": "Precompiled", "precompiled_charsmap": blob}), "precompiled_charsmap")
    files = {}
    for name, (record, field) in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(record))
        files[path] = field
    repeated = tmp_path / "repeated-key.json"
    repeated.write_text(json.dumps(bpe).replace('"vocab": {', '"vocab": {' + json.dumps(first) + ": 0, ", 1))
    files[repeated] = "appears twice"
    for name, at in [("surrogate-prefix", '"continuing_subword_prefix": "##"'), ("surrogate-key", '"[UNK]":')]:
        lone = tmp_path / f"{name}.json"  # json.dumps writes the escape \ud800, which json.loads gives as a lone surrogate
        lone.write_text(json.dumps(wordpiece).replace(at, at.replace("##", "\\ud800").replace("[UNK]", "\\udfff[UNK]"), 1))
        files[lone] = "lone surrogate"
    deep = tmp_path / "deep.json"
    deep.write_text('{"model": ' + "[" * 100_000 + "]" * 100_000 + "}")
    files[deep] = "deeply"
    assert_format_errors(files, "huggingface")


@pytest.mark.parametrize("name", [path.name for path in HF_FILES])
def test_an_hf_file_cut_anywhere_fails_cleanly(tmp_path, name):
    data = (READERS / name).read_bytes()
    files = cut_files(tmp_path, data, truncations(data, 25), ".json")
    results = assert_survives(files, "huggingface")
    assert all(outcome == "FormatError" for outcome, _ in results.values())


# ---- SentencePiece .model ----------------------------------------------------------------------------

def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field(number: int, value: bytes | int, wire: int | None = None) -> bytes:
    """A protobuf field: bytes as length-delimited (wire 2), an int as a varint (wire 0)."""
    if isinstance(value, int):
        return varint(number << 3 | (0 if wire is None else wire)) + varint(value)
    return varint(number << 3 | 2) + varint(len(value)) + value


def sp_piece(text: str, score: float = 0.0, kind: int = 1) -> bytes:
    return field(1, text.encode()) + varint(2 << 3 | 5) + struct.pack("<f", score) + field(3, kind)


def sp_model(pieces: list[bytes], trainer: bytes = field(3, 1), normalizer: bytes = field(3, 0)) -> bytes:
    """A ModelProto (Unigram, no dummy prefix unless `normalizer` says otherwise)."""
    return b"".join(field(1, piece) for piece in pieces) + field(2, trainer) + field(3, normalizer)


def test_bad_sentencepiece_fields_are_format_errors_naming_the_field(tmp_path):
    good = [sp_piece("<unk>", 0.0, 2), sp_piece("a", -1.0), sp_piece("b", -2.0), sp_piece("ab", -0.5)]
    assert polytok.formats.sentencepiece.tokenizer_from_sentencepiece(sp_model(good), "good").encode("ab") == [3]
    cases = {
        # an int where bytes belong: the piece's text, the charsmap, a nested message (was bytes(n))
        "piece-text-int": (sp_model([field(1, 2**62), *good]), "pieces[0].piece"),
        "charsmap-int": (sp_model(good, normalizer=field(2, 2**62)), "precompiled_charsmap"),
        "trainer-int": (b"".join(field(1, piece) for piece in good) + field(2, 2**40), "trainer_spec"),
        "pieces-int": (field(1, 5) + sp_model(good), "pieces[0]"),
        "type-bytes": (sp_model(good, trainer=field(3, b"\x01")), "trainer_spec.model_type"),
        "kind-bytes": (sp_model([field(1, b"x") + field(3, b"\x01"), *good]), "pieces[0].type"),
        "flag-bytes": (sp_model(good, normalizer=field(3, b"1")), "add_dummy_prefix"),
        "length-past-end": (sp_model(good) + varint(1 << 3 | 2) + varint(2**40) + b"xx", "runs past the end"),
        "varint-long": (sp_model(good) + varint(1 << 3) + b"\xff" * 11 + b"\x01", "longer than 10 bytes"),
        "varint-cut": (sp_model(good) + varint(1 << 3) + b"\xff", "ends inside a number"),
        "wire-3": (sp_model(good) + varint(7 << 3 | 3), "wire type 3"),
        "field-0": (b"\x00" + sp_model(good), "field number 0"),
        "byte-negative": (sp_model([*good, sp_piece("<0x-1>", 0.0, 6)]), "pieces[4]"),
        "byte-lower": (sp_model([*good, sp_piece("<0xab>", 0.0, 6)]), "pieces[4]"),
        "byte-space": (sp_model([*good, sp_piece("<0x F>", 0.0, 6)]), "pieces[4]"),
        "kind-99": (sp_model([*good, sp_piece("c", 0.0, 99)]), "pieces[4].type"),
        "score-short": (sp_model([field(1, b"c") + field(2, b"\0\0"), *good]), "pieces[0].score"),
        "empty-piece": (sp_model([*good, sp_piece("", 0.0)]), "pieces[4].piece"),
        "repeated-piece": (sp_model([*good, sp_piece("ab", -9.0)]), "is also pieces[3]"),
        "non-utf8": (sp_model([*good, field(1, b"\xff\xfe")]), "pieces[4].piece"),
        "no-unknown": (sp_model(good[1:]), "UNKNOWN"),
        "no-pieces": (field(2, field(3, 1)), "no pieces"),
        "word-model": (sp_model(good, trainer=field(3, 3)), "model_type"),
        "charsmap-header": (sp_model(good, normalizer=field(2, b"\x01")), "charsmap"),
        "charsmap-size": (sp_model(good, normalizer=field(2, struct.pack("<I", 2**32 - 4) + b"\0" * 8)), "charsmap"),
        "unknown-score": (sp_model([sp_piece("<unk>", 0.0, 2), sp_piece("a", float("-inf"))]), "unknown score"),
    }
    files = {}
    for name, (data, field_name) in cases.items():
        path = tmp_path / f"{name}.model"
        path.write_bytes(data)
        files[path] = field_name
    assert_format_errors(files, "sentencepiece")


def test_a_long_sentencepiece_bpe_piece_loads_fast(tmp_path):
    # a cut is tried only where both sides could be pieces: one 200,000-character piece does
    # not cost its length squared
    pieces = [sp_piece("<unk>", 0.0, 2), sp_piece("a", -1.0), sp_piece("b", -2.0), sp_piece("ab" * 100_000, -3.0)]
    path = tmp_path / "long.model"
    path.write_bytes(sp_model(pieces, trainer=field(3, 2)))
    results = outcomes([("sentencepiece", path)], timeout=20)
    assert results[str(path)][0] == "ok"


@pytest.mark.parametrize("name", [path.name for path in SP_FILES])
def test_a_sentencepiece_model_cut_or_edited_anywhere_fails_cleanly(tmp_path, name):
    data = (READERS / name).read_bytes()
    files = cut_files(tmp_path, data, truncations(data, 30), ".model")
    for at in truncations(data, 30):
        for byte in (0x00, 0xFF):
            path = tmp_path / f"byte-{at}-{byte}.model"
            path.write_bytes(data[:at] + bytes([byte]) + data[at + 1 :])
            files.append(path)
    assert_survives(files, "sentencepiece")


# ---- .ptc counts -------------------------------------------------------------------------------------

def counts_file(path: Path, header: dict[str, Any] | bytes | None = None, offsets=None, counts=None, data=None) -> Path:
    """A counts file of three pre-tokens, its parts replaced as given, with a checksum that matches
    what is written (so only the edit is wrong)."""
    import hashlib

    import numpy as np

    offsets = np.array([0, 1, 3, 6] if offsets is None else offsets, dtype="<i8")
    counts = np.array([5, 2, 1] if counts is None else counts, dtype="<u8")
    data = b"abcdef" if data is None else data
    digest = hashlib.sha256(offsets.tobytes() + counts.tobytes() + data).hexdigest()
    if not isinstance(header, bytes):
        fields = {"pattern": None, "words": len(counts), "data_bytes": len(data), "sha256": digest}
        header = json.dumps({**fields, **(header or {})}).encode()
    path.write_bytes(b"PTCOUNTS" + struct.pack("<II", 1, len(header)) + header + offsets.tobytes() + counts.tobytes() + data)
    return path


def test_bad_counts_files_are_format_errors(tmp_path):
    files = {
        counts_file(tmp_path / "unsorted.ptc", data=b"bacdef"): "sorted",
        counts_file(tmp_path / "repeated.ptc", data=b"aaadef", offsets=[0, 1, 2, 6]): "sorted",
        counts_file(tmp_path / "zero.ptc", counts=[5, 0, 1]): "zero",
        counts_file(tmp_path / "falling.ptc", offsets=[0, 4, 3, 6]): "offsets",
        counts_file(tmp_path / "words-huge.ptc", header={"words": 2**62}): "header",
        counts_file(tmp_path / "bytes-huge.ptc", header={"data_bytes": 2**62}): "header",
        counts_file(tmp_path / "words-negative.ptc", header={"words": -1}): "'words'",
        counts_file(tmp_path / "words-bool.ptc", header={"words": True}): "'words'",
        counts_file(tmp_path / "digits.ptc", header=b'{"words": ' + b"9" * 5000 + b"}"): "header",
        counts_file(tmp_path / "deep.ptc", header=b"[" * 100_000 + b"]" * 100_000): "header",
        counts_file(tmp_path / "not-json.ptc", header=b"\xff{"): "header",
        counts_file(tmp_path / "checksum.ptc", header={"sha256": "0" * 64}): "checksum",
    }
    huge_header = tmp_path / "header-size.ptc"
    huge_header.write_bytes(b"PTCOUNTS" + struct.pack("<II", 1, 2**32 - 1) + b"{}")
    files[huge_header] = "truncated inside its header"
    assert_format_errors(files, "counts")
    valid = counts_file(tmp_path / "valid.ptc")
    assert PreTokenCounts.load(valid).to_dict() == {b"a": 5, b"bc": 2, b"def": 1}


def test_a_counts_file_cut_anywhere_fails_cleanly(tmp_path):
    source = tmp_path / "source.ptc"
    PreTokenCounts.from_dict({b"hello": 3, b" world": 2, b"!": 7}).save(source)
    data = source.read_bytes()
    files = cut_files(tmp_path, data, range(len(data)), ".ptc")
    results = assert_survives(files, "counts")
    assert all(outcome == "FormatError" for outcome, _ in results.values())
    with pytest.raises(FormatError):
        PreTokenCounts.load(files[len(data) // 2])


def test_a_backtracking_regex_in_an_hf_file_fails_instead_of_hanging(tmp_path):
    record = hf_record("hf-wordpiece.json")
    catastrophic = {"Regex": r"(a|aa)+$|(\w+\s?)*!"}
    files = {
        "split": dict(record, pre_tokenizer={"type": "Split", "pattern": catastrophic, "behavior": "Isolated"}),
        "replace": dict(record, normalizer={"type": "Replace", "pattern": catastrophic, "content": "x"}),
    }
    for name, edited_record in files.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(edited_record))
        tokenizer = polytok.load(path)
        assert tokenizer.encode("hello") == tokenizer.encode("hello")
        with pytest.raises(EncodeError, match="backtracks catastrophically"):
            tokenizer.encode("a" * 40 + "b")  # ~2^40 steps without the time limit


def test_many_user_defined_pieces_cost_no_time_per_piece(tmp_path):
    # 20,000 user-defined pieces that all start with "aa": finding them costs the text's length
    # (was 20 s for 100,000 characters, a scan of every piece at every position)
    pieces = [sp_piece("<unk>", 0.0, 2), sp_piece("a", -1.0), sp_piece("b", -1.0)]
    pieces += [sp_piece(f"aa{index}x", 0.0, 4) for index in range(20_000)]
    path = tmp_path / "user-defined.model"
    path.write_bytes(sp_model(pieces))
    tokenizer = polytok.load(path)
    text = "a" * 100_000 + "aa7x" + "b"
    ids = tokenizer.encode(text)
    assert ids == [1] * 100_000 + [3 + 7, 2]
    ids, spans = tokenizer.encode_with_offsets(text)
    assert spans[-2].tolist() == [100_000, 100_004]


def test_a_wordpiece_file_without_a_word_limit_encodes_long_words_in_linear_time(tmp_path):
    # each step looks up candidates no longer than the longest token (was cubic in the word:
    # a file's max_input_chars_per_word of 10^9 made a 3,000-character word take minutes)
    record = edited(hf_record("hf-wordpiece.json"), ("model", "max_input_chars_per_word"), 10**9)
    path = tmp_path / "no-limit.json"
    path.write_text(json.dumps(record))
    code = f"import polytok; ids = polytok.load({str(path)!r}).encode('a' * 100_000); print(len(ids))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr[-1000:]
    assert int(done.stdout) == 100_000


def test_a_long_special_or_added_token_loads_in_time_linear_in_its_length(tmp_path):
    # a 100,000-character token built a DFA for 30 s (the fuzzer's hf-bpe hang); every literal
    # matcher now takes an NFA for long patterns. 3 files within the child's 60 s, found whole
    long = "a" * 100_000
    hf = hf_record("hf-bpe-byte-level.json")
    size = len(hf["model"]["vocab"])
    hf["added_tokens"] = [{"id": size, "content": long, "special": True, "normalized": False, "lstrip": False,
                           "rstrip": False, "single_word": False}]
    files = [("huggingface", tmp_path / "added.json")]
    files[0][1].write_text(json.dumps(hf))
    vocab = small_tokenizer().vocab
    Tokenizer(vocab, segmenter="merges", pattern="cl100k", special_tokens={long: len(vocab)}).save(tmp_path / "special.json")
    files.append(("polytok", tmp_path / "special.json"))
    sp = [sp_piece("<unk>", 0.0, 2), sp_piece("a", -1.0), sp_piece(long, 0.0, 4)]
    (tmp_path / "user-defined.model").write_bytes(sp_model(sp))
    files.append(("sentencepiece", tmp_path / "user-defined.model"))
    results = outcomes(files, timeout=60)
    assert all(outcome == "ok" for outcome, _ in results.values()), results
    assert polytok.load(tmp_path / "added.json").encode(long, allowed_special="all") == [size]
    assert polytok.load(tmp_path / "special.json").encode(long, allowed_special="all") == [len(vocab)]
    assert polytok.load(tmp_path / "user-defined.model").encode(long) == [2]
