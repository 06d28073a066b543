"""Fuzzing the file readers (a script, not CI): real files of every format polytok reads, mutated,
loaded and used in child processes that have an address-space limit.

Seeds, built at start-up in a temporary directory (or `--seeds-dir`):

- polytok JSON of BPE, WordPiece, Unigram and ConvexTok tokenisers trained with `polytok.train`;
- tiktoken ranks: the real cl100k_base and o200k_base (from the `bpe-openai` wheel) whole, and cut
  to their first 1,000 ranks (most mutants use the cut files, for speed);
- HF tokenizer.json BPE (byte-level and Llama-style), WordPiece and Unigram, made with `tokenizers`;
- SentencePiece .model BPE and Unigram (one with the standard nmt_nfkc character map), made with
  `sentencepiece`;
- .ptc counts files written by `polytok.count(...).save`.

Mutations: bytes (bit flips, interesting bytes, inserts, deletes, truncation, duplicated and
repeated ranges, splices of two seeds); JSON values (huge, negative and boundary integers, floats,
NaN, strings, lone surrogates, null, lists, objects, nesting up to 100,000 deep, duplicate keys,
duplicated, deleted and swapped items, equal ids); tiktoken lines (bad base64, huge or duplicate
ranks, duplicate tokens, missing lines, long tokens); protobuf fields of .model files (values,
field numbers, wire types, lengths made huge or wrong, overlong varints, pieces duplicated or
swapped, the character map's bytes); .ptc preambles, header fields and bodies (offsets, counts,
pre-tokens), the checksum recomputed after most body edits so they reach the checks behind it.

Each mutant is loaded (`polytok.load`, which detects the format, or the format's own reader) and,
when it loads, encodes a few texts (plain, special-token text, random bytes and Unicode, with
specials allowed, disallowed and ordinary) and decodes the ids; a counts file trains a small BPE.
Persistent worker processes (`--workers`) run the mutants under RLIMIT_AS (`--memory-gb`); one that
dies or takes longer than `--timeout` seconds on a mutant is killed and started again. Outcomes:
ok (it loaded; encoding raised at most polytok.Error, e.g. for a disallowed special token),
polytok.Error (load refused the file), other exception, abort (the worker died), hang. Each
mutant is a function of (--seed, format, index), so a run is reproducible; every mutant of the
last three kinds is saved under `--findings` with a note of what it was.

    python benchmarks/fuzz_files.py --per-format 100000 [--formats polytok,counts] [--workers 2] [--seed 0]
"""
from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import math
import os
import pickle
import random
import re
import resource
import select
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from polytok.formats.sentencepiece import proto
from polytok.formats.sentencepiece.proto import encode_varint

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"

FORMATS = ("polytok", "tiktoken", "hf-bpe", "hf-wordpiece", "hf-unigram", "sp-bpe", "sp-unigram", "counts")
OUTCOMES = ("ok", "polytok.Error", "other exception", "abort", "hang")
SPECIALS = ["<|endoftext|>", "<|fim_prefix|>"]
# tiktoken's special tokens of the real encodings (tiktoken_ext/openai_public.py)
TIKTOKEN_SPECIALS = {
    "cl100k_base": {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                    "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276},
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
CUT_RANKS = 1000
# A share of the tiktoken mutants use the whole real files (1.7 and 3.6 MB).
FULL_SHARE = 0.03


@dataclass(frozen=True)
class Seed:
    """One real file: its format, file name (whose suffix the mutants keep), what loading it needs."""

    format: str
    name: str
    options: dict = field(default_factory=dict)
    full: bool = False


# ---- seeds -----------------------------------------------------------------------------------

def training_lines() -> list[str]:
    """Lines of the Latin-script excerpts in tests/data (small vocabularies cover their characters)."""
    return [line for path in sorted(DATA.glob("*.txt")) if "zh-CN" not in path.name
            for line in path.read_text(encoding="utf-8").splitlines() if line.strip()][::3]


def build_seeds(directory: Path) -> list[Seed]:
    """Writes one real file per seed into `directory` and returns the seeds; the manifest
    (seeds.json) lets workers and later runs read them back."""
    import polytok

    directory.mkdir(parents=True, exist_ok=True)
    lines = training_lines()
    seeds: list[Seed] = []
    counts = polytok.count(polytok.texts(lines), special_tokens=SPECIALS)
    for algorithm, size in (("bpe", 400), ("wordpiece", 600), ("unigram", 400), ("convex", 300)):
        tokenizer = polytok.train(counts, algorithm=algorithm, vocab_size=size, special_tokens=SPECIALS, progress=False)
        tokenizer.save(directory / f"polytok-{algorithm}.json")
        seeds.append(Seed("polytok", f"polytok-{algorithm}.json"))
    counts.save(directory / "cl100k.ptc")
    seeds.append(Seed("counts", "cl100k.ptc"))
    polytok.count(polytok.texts(lines[:200]), pattern="gpt2").save(directory / "gpt2.ptc")
    seeds.append(Seed("counts", "gpt2.ptc"))
    seeds += tiktoken_seeds(directory)
    seeds += huggingface_and_sentencepiece_seeds(directory, lines)
    (directory / "seeds.json").write_text(json.dumps([asdict(seed) for seed in seeds], indent=1), encoding="utf-8")
    return seeds


def tiktoken_seeds(directory: Path) -> list[Seed]:
    """cl100k_base and o200k_base whole and cut to their first CUT_RANKS ranks."""
    sys.path.insert(0, str(ROOT / "tests"))
    from real_vocabularies import unpack

    seeds = []
    for name, path in unpack(directory / "real").items():
        pattern = name.split("_")[0]
        whole = path.read_bytes()
        (directory / f"{name}.tiktoken").write_bytes(whole)
        seeds.append(Seed("tiktoken", f"{name}.tiktoken", {"pattern": pattern, "special_tokens": TIKTOKEN_SPECIALS[name]}, full=True))
        cut = b"".join(whole.splitlines(keepends=True)[:CUT_RANKS])
        (directory / f"{name}-{CUT_RANKS}.tiktoken").write_bytes(cut)
        seeds.append(Seed("tiktoken", f"{name}-{CUT_RANKS}.tiktoken", {"pattern": pattern, "special_tokens": list(TIKTOKEN_SPECIALS[name])}))
    shutil.rmtree(directory / "real")
    return seeds


def huggingface_and_sentencepiece_seeds(directory: Path, lines: list[str]) -> list[Seed]:
    """HF tokenizer.json files (tools/gen_reader_fixtures.py's layouts) and SentencePiece models."""
    import sentencepiece

    sys.path.insert(0, str(ROOT / "tools"))
    import gen_reader_fixtures as fixtures
    from polytok.formats.sentencepiece import read_model

    seeds = []
    corpus, rules = directory / "train.txt", directory / "rules.tsv"
    corpus.write_text("\n".join(fixtures.TRAIN), encoding="utf-8")
    rules.write_text("".join(f"{source}\t{target}\n" for source, target in fixtures.NORMALIZATION_RULES.items()), encoding="utf-8")
    models = {**fixtures.SENTENCEPIECE_MODELS, "sp-unigram-nfkc.model": dict(model_type="unigram", vocab_size=300,
                                                                              normalization_rule_name="nmt_nfkc")}
    for name, options in models.items():
        rules_option = {} if "normalization_rule_name" in options else {"normalization_rule_tsv": str(rules)}
        sentencepiece.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(directory / Path(name).stem), minloglevel=2,
                                                 num_threads=1, character_coverage=0.995, **rules_option, **options)
        seeds.append(Seed("sp-" + options["model_type"], name))
    charsmap = read_model((directory / "sp-unigram.model").read_bytes(), "sp-unigram.model")["precompiled_charsmap"]
    builders = {"hf-bpe": [fixtures.byte_level_bpe, fixtures.byte_level_nfc_bpe, fixtures.llama_bpe],
                "hf-wordpiece": [fixtures.wordpiece], "hf-unigram": [lambda: fixtures.unigram(charsmap)]}
    for kind, functions in builders.items():
        for index, build in enumerate(functions):
            name = f"{kind}-{index}.json"
            build().save(str(directory / name))
            seeds.append(Seed(kind, name))
    for path in (corpus, rules, *directory.glob("*.vocab")):
        path.unlink()
    return seeds


def read_seeds(directory: Path) -> list[Seed]:
    """The seeds a `build_seeds` run left in `directory`."""
    return [Seed(**entry) for entry in json.loads((directory / "seeds.json").read_text(encoding="utf-8"))]


# ---- mutations: bytes ------------------------------------------------------------------------

INTERESTING_BYTES = b"\x00\x01\x7f\x80\xff\xfe\xc0\xed\xf0\x0a\x0d\x20\x22\x2c\x3a\x5b\x5d\x7b\x7d\x3d\x2b\x2f\x5c"


def flip_bits(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    out = bytearray(data)
    places = [rng.randrange(len(out)) for _ in range(rng.choice([1, 1, 2, 4, 16]))] if out else []
    for at in places:
        out[at] ^= 1 << rng.randrange(8)
    return bytes(out), f"flip bits at {places[:4]}"


def set_bytes(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    if not data:
        return data, "set bytes (empty)"
    out = bytearray(data)
    at = rng.randrange(len(out))
    value = bytes(rng.choice(INTERESTING_BYTES) for _ in range(rng.choice([1, 1, 2, 4, 8])))
    out[at:at + len(value)] = value
    return bytes(out), f"set bytes at {at} to {value!r}"


def insert_bytes(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    value = rng.randbytes(rng.choice([1, 2, 8, 64])) if rng.random() < 0.5 else bytes(rng.choice(INTERESTING_BYTES) for _ in range(rng.choice([1, 3])))
    return data[:at] + value + data[at:], f"insert {value[:16]!r} at {at}"


def delete_range(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    at = rng.randrange(len(data) + 1)
    length = rng.choice([1, 2, 8, 100, 4096])
    return data[:at] + data[at + length:], f"delete {length} bytes at {at}"


def truncate(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    at = rng.choice([0, 1, 8, 16, rng.randrange(len(data) + 1), len(data) - 1, len(data) // 2])
    at = max(0, min(at, len(data)))
    return data[:at], f"truncate to {at} bytes"


def duplicate_range(data: bytes, rng: random.Random, _: list[bytes]) -> tuple[bytes, str]:
    start = rng.randrange(len(data) + 1)
    piece = data[start:start + rng.choice([1, 4, 64, 1024, 65536])]
    times = rng.choice([1, 1, 2, 16, 1000]) if len(piece) <= 1024 else 1
    at = rng.randrange(len(data) + 1)
    return data[:at] + piece * times + data[at:], f"copy {len(piece)} bytes from {start} x{times} to {at}"


def splice(data: bytes, rng: random.Random, others: list[bytes]) -> tuple[bytes, str]:
    other = rng.choice(others)
    at, other_at = rng.randrange(len(data) + 1), rng.randrange(len(other) + 1)
    return data[:at] + other[other_at:], f"splice at {at} with another seed from {other_at}"


BYTE_MUTATORS: list[Callable[[bytes, random.Random, list[bytes]], tuple[bytes, str]]] = [
    flip_bits, set_bytes, insert_bytes, delete_range, truncate, duplicate_range, splice]


# ---- mutations: JSON -------------------------------------------------------------------------

class Marker:
    """What json.dumps cannot write; `made` counts those made, so that a record without them is
    written by json.dumps (C, fast) and not by dump_json."""

    made = 0

    def __init_subclass__(cls) -> None:
        original = cls.__new__

        def counted(kind: type, *arguments: Any) -> Any:
            Marker.made += 1
            return original(kind, *arguments)

        cls.__new__ = counted


class Raw(str, Marker):
    """JSON text written as it is (deep nesting, numbers json.dumps would not write)."""


class Pairs(list, Marker):
    """A JSON object as (key, value) pairs, so that a key can appear twice."""


INTEGERS = [0, 1, -1, 2, 255, 256, 2**31 - 1, 2**31, -2**31, 2**32 - 1, 2**32, 2**53 + 1, 2**63 - 1, 2**63, 2**64,
            -2**63, 4_000_000_000, 10**30, 10**100]
FLOATS = [0.0, -0.0, 0.5, 1.5, -1.5, 1e308, -1e308, 5e-324, 4e9, 2.0**64, math.nan, math.inf, -math.inf]
STRINGS = ["", "x", "a" * 100_000, "\ud800", "\udfff", "<|endoftext|>", "[UNK]", "[SEP]", "<unk>", "##", "\u2581", "\x00",
           "(?:", "(a+)+$", "\\p{Nope}", "(?=x)", "[", "\\", "([a-z]+)*\\d", "!!!", "AAAA", "=", "Zm9v", "////", "é",
           "BPE", "WordPiece", "Unigram", "WordLevel", "ByteLevel", "Sequence", "merges", "bpe", "unigram", "viterbi",
           "longest_match", "merges", "shortest_path", "char_merges", "polytok", "Replace", "Precompiled", "NFKC",
           "Metaspace", "Split", "Strip", "ByteFallback", "Fuse", "BertNormalizer", "Whitespace", "TemplateProcessing"]


def interesting_value(rng: random.Random, old: Any) -> Any:
    """A value to put where `old` was: boundary numbers, odd strings, other types, deep nesting."""
    kind = rng.random()
    if kind < 0.3:
        if isinstance(old, int) and not isinstance(old, bool) and rng.random() < 0.5:
            return old + rng.choice([-1, 1, 2, 1000, 2**20, 2**31, -2**31])
        return rng.choice(INTEGERS)
    if kind < 0.42:
        return rng.choice(FLOATS)
    if kind < 0.65:
        return rng.choice(STRINGS)
    if kind < 0.93:
        return rng.choice([None, True, False, [], {}, [1, 2], {"a": 1}, [[0, 1]], ["a", "b"], [None], {"": None},
                           Raw("9" * 5000), Raw("1e999"), Raw("-0"), Raw("1" + "0" * 400), [0] * 100_000])
    depth = rng.choice([100, 1000, 10_000, 100_000])
    opening, closing = rng.choice([("[", "]"), ('{"a":', "}")])
    return Raw(opening * depth + "1" + closing * depth)


_SCALARS = (int, float, str, bool, type(None))


def dump_json(value: Any) -> str:
    """JSON text of `value`, with Raw text and Pairs objects as they are."""
    if isinstance(value, Raw):
        return str(value)
    if isinstance(value, Pairs):
        return "{" + ",".join(json.dumps(key) + ":" + dump_json(item) for key, item in value) + "}"
    if type(value) in (list, dict) and all(type(item) in _SCALARS for item in (value.values() if type(value) is dict else value)):
        return json.dumps(value)
    if isinstance(value, dict):
        return "{" + ",".join(json.dumps(key) + ":" + dump_json(item) for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump_json(item) for item in value) + "]"
    return json.dumps(value)


def random_node(root: Any, rng: random.Random) -> list[Any]:
    """A random path (keys and indices) from `root` into its containers; a walk that may stop at
    any container."""
    path: list[Any] = []
    node = root
    while isinstance(node, (dict, list)) and node and not isinstance(node, Pairs):
        if len(path) > 1 and rng.random() < 0.15:
            break
        key = rng.choice(list(node)) if isinstance(node, dict) else rng.randrange(len(node))
        path.append(key)
        node = node[key]
    return path


def resolve(root: Any, path: list[Any]) -> Any:
    for key in path:
        root = root[key]
    return root


_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def json_mutation(record: Any, rng: random.Random) -> str:
    """Changes `record` in place (its root stays a container); says what changed."""
    path = random_node(record, rng)
    if not path:
        return "no change (empty record)"
    parent, key = resolve(record, path[:-1]), path[-1]
    where = "$" + "".join(f"[{part!r}]" for part in path)
    op = rng.random()
    if op < 0.12 and isinstance(parent[key], str) and len(parent[key]) >= 8 and len(parent[key]) % 4 == 0 \
            and _BASE64.fullmatch(parent[key]):
        blob = base64.b64decode(parent[key])
        if len(blob) > 64 and rng.random() < 0.7:
            blob, note = charsmap_mutant(blob, rng)
        else:
            blob, note = rng.choice(BYTE_MUTATORS[:5])(blob, rng, [])
        parent[key] = base64.b64encode(blob).decode("ascii")
        return f"{where}: base64 bytes, {note}"
    if op < 0.45:
        value = interesting_value(rng, parent[key])
        parent[key] = value
        shown = repr(value) if len(repr(value)) < 60 else repr(value)[:57] + "..."
        return f"{where} = {shown}"
    if op < 0.55:
        del parent[key]
        return f"delete {where}"
    if op < 0.63 and isinstance(parent, list):
        copies = rng.choice([1, 1, 10, 1000 if len(json.dumps(parent[key])) < 1000 else 10])
        parent[key:key] = [json.loads(json.dumps(parent[key]))] * copies
        return f"duplicate {where} x{copies}"
    if op < 0.7 and len(parent) > 1:
        other = rng.choice(list(parent)) if isinstance(parent, dict) else rng.randrange(len(parent))
        parent[key], parent[other] = parent[other], parent[key]
        return f"swap {where} with [{other!r}]"
    if op < 0.77 and len(parent) > 1:
        other = rng.choice(list(parent)) if isinstance(parent, dict) else rng.randrange(len(parent))
        parent[key] = json.loads(json.dumps(parent[other]))
        return f"{where} = copy of [{other!r}]"
    if op < 0.84 and isinstance(parent, dict):
        pairs = Pairs(parent.items())
        other = rng.choice(pairs)
        pairs.append((key if rng.random() < 0.5 else other[0], interesting_value(rng, parent[key]) if rng.random() < 0.5 else other[1]))
        holder = resolve(record, path[:-2]) if len(path) > 1 else None
        if holder is None:
            parent.clear()
            parent["\0pairs"] = pairs  # written back by json_mutant
        else:
            holder[path[-2]] = pairs
        return f"duplicate key in {where[:-len(f'[{key!r}]')] or '$'}"
    if op < 0.9 and isinstance(parent, dict):
        parent[rng.choice(["", "extra", "\ud800", "vocab", "type", "model", "id"]) + rng.choice(["", "x"])] = interesting_value(rng, None)
        return f"add a key beside {where}"
    if op < 0.95 and isinstance(parent, list):
        rng.shuffle(parent)
        return f"shuffle the list holding {where}"
    parent[key] = rng.choice([str(parent[key]), [parent[key]], {"value": parent[key]}, -1 if parent[key] else 1])
    return f"{where} changes type"


def json_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    record = json.loads(data)
    made = Marker.made
    notes = [json_mutation(record, rng) for _ in range(rng.choice([1, 1, 1, 2, 3]))]
    if isinstance(record, dict) and "\0pairs" in record:
        record = record["\0pairs"]
    text = dump_json(record) if Marker.made != made else json.dumps(record)
    return text.encode("utf-8", "surrogatepass"), "json: " + "; ".join(notes)


# ---- mutations: tiktoken lines ---------------------------------------------------------------

RANKS = [b"-1", b"2147483647", b"2147483648", b"4294967295", b"4294967296", b"4000000000", b"9223372036854775808",
         b"1" + b"0" * 30, b"9" * 5000, b"+5", b"05", b"1_000", b"0x10", b"\xd9\xa3", b"1e5", b"", b"1.0", b" 7"]


def tiktoken_mutation(lines: list[bytes], rng: random.Random) -> str:
    if not lines:
        lines.append(b"IQ== 0")
        return "add a line to an empty file"
    at = rng.randrange(len(lines))
    parts = lines[at].split(b" ")
    token, rank = (parts + [b""])[:2]
    op = rng.random()
    if op < 0.15:
        bad = rng.choice([token[:-1], token + b"=", token.replace(b"=", b""), b"!" + token, token + b"\xff", b"", b"====",
                          token.lower(), b"-_" + token, b"AAAA" * 20000])
        lines[at] = bad + b" " + rank
        return f"line {at + 1}: token {bad[:20]!r}"
    if op < 0.3:
        new = rng.choice(RANKS + [str(len(lines) + rng.choice([0, 1, 100, 2**20])).encode()])
        lines[at] = token + b" " + new
        return f"line {at + 1}: rank {new[:20]!r}"
    if op < 0.4:
        other = rng.randrange(len(lines))
        lines[at] = token + b" " + (lines[other].split(b" ") + [b""])[1]
        return f"line {at + 1}: rank of line {other + 1} (duplicate rank)"
    if op < 0.5:
        other = rng.randrange(len(lines))
        lines[at] = lines[other].split(b" ")[0] + b" " + rank
        return f"line {at + 1}: token of line {other + 1} (duplicate token)"
    if op < 0.57:
        other = rng.randrange(len(lines))
        lines[at], lines[other] = lines[other], lines[at]
        return f"swap lines {at + 1} and {other + 1}"
    if op < 0.64:
        del lines[at:at + rng.choice([1, 1, 10])]
        return f"delete from line {at + 1}"
    if op < 0.7:
        lines.insert(rng.randrange(len(lines) + 1), lines[at])
        return f"duplicate line {at + 1}"
    if op < 0.78:
        long = base64.b64encode(rng.randbytes(rng.choice([256, 65536, 1 << 20])))
        lines.append(long + b" " + str(len(lines)).encode())
        return f"append a token of {len(long)} base64 characters"
    if op < 0.85:
        extra = rng.choice([b"", b" ", b"\t", b"\r", b"# comment", b"\x00", b"IQ== 0 0", b"IQ==  0", b"IQ==\t0", b"IQ=="])
        lines.insert(rng.randrange(len(lines) + 1), extra)
        return f"insert line {extra!r}"
    if op < 0.92:
        count = rng.choice([10, 1000])
        start = len(lines)
        lines.extend(base64.b64encode(rng.randbytes(rng.randrange(1, 6))) + b" " + str(start + i).encode() for i in range(count))
        return f"append {count} random tokens"
    lines[at] = lines[at] + rng.choice([b"\r", b" ", b"  x", b"\xe2\x80\xa8"])
    return f"line {at + 1}: trailing bytes"


def tiktoken_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    notes = [tiktoken_mutation(lines, rng) for _ in range(rng.choice([1, 1, 2, 3]))]
    return b"\n".join(lines) + rng.choice([b"\n", b"", b"\r\n"]), "tiktoken: " + "; ".join(notes)


# ---- mutations: precompiled character maps ---------------------------------------------------

def charsmap_mutant(blob: bytes, rng: random.Random) -> tuple[bytes, str]:
    """A changed precompiled charsmap (a 4-byte trie size, the double-array trie's 32-bit units,
    NUL-terminated replacements): units, the size, the replacements or the length."""
    out = bytearray(blob)
    trie_size = struct.unpack_from("<I", out)[0] if len(out) >= 4 else 0
    units = max(0, min(trie_size, len(out) - 4) // 4)
    op = rng.random()
    if op < 0.45 and units:
        places = [rng.randrange(units) for _ in range(rng.choice([1, 1, 2, 8, 64]))]
        for place in places:
            value = rng.choice([rng.getrandbits(32), 0, 0xFFFFFFFF, 1 << 31, 1 << 9, 1 << 8, (1 << 10) * rng.randrange(1 << 22),
                                struct.unpack_from("<I", out, 4 + 4 * place)[0] ^ (1 << rng.randrange(32))])
            struct.pack_into("<I", out, 4 + 4 * place, value)
        return bytes(out), f"charsmap: {len(places)} trie units changed, first at {places[0]}"
    if op < 0.6 and len(out) >= 4:
        size = rng.choice([0, 4, trie_size - 4, trie_size + 4, trie_size + 1, len(out) - 4, 2**32 - 4, 2**31])
        struct.pack_into("<I", out, 0, max(0, size) & 0xFFFFFFFF)
        return bytes(out), f"charsmap: trie size {size}"
    if op < 0.8 and len(out) > 4 + trie_size:
        start = 4 + trie_size
        for _ in range(rng.choice([1, 4, 32])):
            out[rng.randrange(start, len(out))] = rng.choice([0, 0xFF, 0xC3, 0x80, 0x20, rng.randrange(256)])
        if rng.random() < 0.3:
            out[start:] = out[start:].replace(b"\0", b"")
        return bytes(out), "charsmap: replacements changed"
    cut = rng.randrange(len(out) + 1)
    return bytes(out[:cut]), f"charsmap: cut to {cut} of {len(out)} bytes"


# ---- mutations: protobuf (.model) ------------------------------------------------------------

def read_varint(data: bytes, at: int) -> tuple[int, int]:
    """The protobuf number at `at` of a seed (the reader's own parser) and where it ends."""
    return proto.read_varint(data, at, "seed")


# fields of ModelProto that are messages: pieces, trainer_spec, normalizer_spec, self_test_data, denormalizer_spec
MESSAGE_FIELDS = {1, 2, 3, 4, 5}


def parse_fields(data: bytes, nested: bool) -> list[list[Any]]:
    """[number, wire, value] per field; the message fields of a ModelProto parsed in turn."""
    fields = []
    at = 0
    while at < len(data):
        key, at = read_varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, at = read_varint(data, at)
        elif wire == 1:
            value, at = data[at:at + 8], at + 8
        elif wire == 2:
            length, at = read_varint(data, at)
            value, at = data[at:at + length], at + length
            if nested and number in MESSAGE_FIELDS:
                value = parse_fields(value, False)
        elif wire == 5:
            value, at = data[at:at + 4], at + 4
        else:
            raise ValueError(f"wire type {wire}")
        fields.append([number, wire, value])
    return fields


def write_fields(fields: list[list[Any]]) -> bytes:
    out = bytearray()
    for entry in fields:
        number, wire, value = entry[:3]
        out += encode_varint(number << 3 | wire) if not isinstance(number, bytes) else number
        if isinstance(value, list):
            value = write_fields(value)
        if wire == 0:
            out += value if isinstance(value, bytes) else encode_varint(value)
        elif wire == 2:
            length = entry[3] if len(entry) > 3 else encode_varint(len(value))
            out += length + value
        else:
            out += value if isinstance(value, bytes) else b""
    return bytes(out)


VARINTS = [0, 1, 2, 3, 4, 5, 6, 7, 255, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**63, 2**64 - 1]
SCORES = [math.nan, math.inf, -math.inf, 3.4e38, -3.4e38, -0.0, 1e-45, 0.0, 100.0, -1e30]
PIECES = [b"", b"\xff\xfe", b"\xed\xa0\x80", b"<0xZZ>", b"<0x41>", b"<0x41", b"<0xff>", b" ", b"\xe2\x96\x81", b"\x00",
          b"a" * 10_000, b"<unk>", b"<s>", b"\xe2\x96\x81\xe2\x96\x81", b"\xe2\x81\x87"]


def protobuf_mutation(fields: list[list[Any]], rng: random.Random) -> str:
    """Changes one field of the parsed model in place (or of one of its messages)."""
    charsmaps = [entry for message in fields if message[0] == 3 and isinstance(message[2], list)
                 for entry in message[2] if entry[0] == 2 and isinstance(entry[2], bytes) and entry[2]]
    if charsmaps and rng.random() < 0.2:
        entry = rng.choice(charsmaps)
        entry[2], note = charsmap_mutant(entry[2], rng)
        return "normalizer_spec." + note
    messages = [(f"${i}", entry[2]) for i, entry in enumerate(fields) if isinstance(entry[2], list)]
    holder_name, holder = rng.choice([("$", fields)] + messages) if rng.random() < 0.85 else ("$", fields)
    if holder_name == "$" and rng.random() < 0.6:
        pieces = [(i, entry) for i, entry in enumerate(fields) if entry[0] == 1 and isinstance(entry[2], list)]
        if pieces:
            index, piece = rng.choice(pieces)
            holder_name, holder = f"pieces@{index}", piece[2]
            if rng.random() < 0.25:
                op = rng.random()
                if op < 0.4:
                    fields.insert(rng.randrange(len(fields) + 1), [1, 2, copy.deepcopy(piece[2])])
                    return f"duplicate {holder_name}"
                if op < 0.7:
                    other = rng.choice(pieces)[0]
                    fields[index], fields[other] = fields[other], fields[index]
                    return f"swap {holder_name} with pieces@{other}"
                del fields[index]
                return f"delete {holder_name}"
    if not holder:
        holder.append([1, 0, rng.choice(VARINTS)])
        return f"add a field to empty {holder_name}"
    at = rng.randrange(len(holder))
    entry = holder[at]
    number, wire, value = entry[:3]
    where = f"{holder_name}.field{number}@{at}"
    op = rng.random()
    if op < 0.25:
        if wire == 0:
            entry[2] = rng.choice(VARINTS)
            return f"{where} = {entry[2]}"
        if wire == 5:
            entry[2] = struct.pack("<f", rng.choice(SCORES))
            return f"{where} = float {struct.unpack('<f', entry[2])[0]}"
        if isinstance(value, bytes):
            if rng.random() < 0.5 and value:
                blob = bytearray(value)
                for _ in range(rng.choice([1, 2, 8])):
                    blob[rng.randrange(len(blob))] = rng.randrange(256)
                if rng.random() < 0.3:
                    blob[0:4] = struct.pack("<I", rng.choice([0, 1, 2**31 - 1, 2**32 - 1, len(blob) * 4, len(blob) + 1]))
                entry[2] = bytes(blob) if rng.random() < 0.8 else bytes(blob[:rng.randrange(len(blob) + 1)])
                return f"{where}: bytes changed ({len(value)} bytes)"
            entry[2] = rng.choice(PIECES)
            return f"{where} = {entry[2][:20]!r}"
        entry[2] = [[rng.randrange(1, 50), 0, rng.choice(VARINTS)]]
        return f"{where} = a message with one varint"
    if op < 0.4:
        entry[0] = rng.choice([0, 1, 2, 3, 4, 5, 35, 40, 44, 2**29 - 1, rng.randrange(1, 60)])
        return f"{where}: field number {entry[0]}"
    if op < 0.5:
        entry[1] = rng.randrange(8)
        if entry[1] in (1, 5) and not isinstance(entry[2], bytes):
            entry[2] = b"\x00" * (8 if entry[1] == 1 else 4)
        if entry[1] == 0 and not isinstance(entry[2], int):
            entry[2] = rng.choice(VARINTS)
        if entry[1] == 2 and isinstance(entry[2], int):
            entry[2] = encode_varint(entry[2])
        return f"{where}: wire type {entry[1]}"
    if op < 0.65 and wire == 2:
        length = rng.choice([0, 1, 2**31, 2**32, 2**63, 2**64 - 1, 10**12])
        if isinstance(value, list):
            value = write_fields(value)
        entry[2] = value
        entry[3:] = [encode_varint(length if rng.random() < 0.7 else max(0, len(value) + rng.choice([-1, 1, 2])))]
        return f"{where}: length varint {entry[3].hex()} for {len(value)} bytes"
    if op < 0.72:
        entry[0] = b"\x80" * rng.choice([9, 10, 11, 100]) + b"\x01"
        return f"{where}: overlong varint key"
    if op < 0.82:
        holder.insert(rng.randrange(len(holder) + 1), copy.deepcopy(entry))
        return f"duplicate {where}"
    if op < 0.9:
        del holder[at]
        return f"delete {where}"
    holder.append([rng.randrange(1, 60), rng.choice([0, 2, 5]), rng.choice([0, 2**63, b"\x00\x00\x80\x7f", b"xyz"])])
    if holder[-1][1] == 0 and isinstance(holder[-1][2], bytes):
        holder[-1][2] = 1
    if holder[-1][1] == 5:
        holder[-1][2] = b"\x00\x00\xc0\x7f"
    if holder[-1][1] == 2 and not isinstance(holder[-1][2], bytes):
        holder[-1][2] = b"xyz"
    return f"append a field to {holder_name}"


def protobuf_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    fields = parse_fields(data, True)
    notes = [protobuf_mutation(fields, rng) for _ in range(rng.choice([1, 1, 2, 3]))]
    out = write_fields(fields)
    if rng.random() < 0.1:
        out = out[:rng.randrange(len(out) + 1)]
        notes.append("then truncated")
    return out, "protobuf: " + "; ".join(notes)


# ---- mutations: .ptc counts ------------------------------------------------------------------

PREAMBLE = struct.Struct("<8sII")


def counts_mutant(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    magic, version, header_size = PREAMBLE.unpack_from(data)
    header = json.loads(data[PREAMBLE.size:PREAMBLE.size + header_size])
    body = data[PREAMBLE.size + header_size:]
    words = header["words"]
    offsets = list(struct.unpack_from(f"<{words + 1}q", body))
    counts = list(struct.unpack_from(f"<{words}Q", body, 8 * (words + 1)))
    tokens = [body[16 * words + 8 + offsets[i]:16 * words + 8 + offsets[i + 1]] for i in range(words)]
    op = rng.random()
    # fix: the header's sizes and checksum are made to match the changed body; raw_arrays: None
    # (offsets recomputed from the pre-tokens), True (offsets as edited) or the body's bytes
    fix, raw_arrays, stated_size = True, None, None
    if op < 0.1:
        version = rng.choice([0, 2, 2**32 - 1])
        note = f"version {version}"
    elif op < 0.2:
        stated_size = rng.choice([0, 1, header_size - 1, header_size + 1, 2**31, 2**32 - 1])
        note = f"header size {stated_size}"
    elif op < 0.4:
        key = rng.choice(["words", "data_bytes", "pattern", "sha256", "extra"])
        if rng.random() < 0.2:
            header.pop(key, None)
            note = f"header without {key!r}"
        else:
            header[key] = interesting_value(rng, header.get(key)) if rng.random() < 0.7 else rng.choice(
                ["cl100k", "gpt2", "none", "(a|a)*$", "(?<!x)y", "[", "\\p{L}+", "a{1000000}", "((a*)*)*", "", words, "0" * 64])
            note = f"header {key!r} = {repr(header[key])[:60]}"
        fix = False
    elif op < 0.55:
        index = rng.randrange(len(offsets))
        offsets[index] = rng.choice([-1, 0, 2**62, 2**63 - 1, -2**63, offsets[index] + 1, offsets[index] - 1, offsets[-1] + 1,
                                     offsets[max(0, index - 1)]])
        raw_arrays = True
        note = f"offsets[{index}] = {offsets[index]}"
    elif op < 0.68:
        index = rng.randrange(len(counts))
        value = rng.choice([0, 1, 2**32, 2**63 - 1, 2**63, 2**64 - 1])
        if rng.random() < 0.3:
            counts = [value] * len(counts)
            note = f"every count = {value}"
        else:
            counts[index] = value
            note = f"counts[{index}] = {value}"
    elif op < 0.8:
        index = rng.randrange(len(tokens))
        choice = rng.random()
        if choice < 0.3 and len(tokens) > 1:
            other = rng.randrange(len(tokens))
            tokens[index], tokens[other] = tokens[other], tokens[index]
            note = f"swap pre-tokens {index} and {other}"
        elif choice < 0.5:
            tokens.insert(index, tokens[index])
            counts.insert(index, counts[index])
            note = f"duplicate pre-token {index}"
        elif choice < 0.6:
            tokens[index] = b""
            note = f"pre-token {index} empty"
        elif choice < 0.8:
            tokens[index] = rng.choice([b"\xff\xfe", b"\x00", b"a" * 100_000, b"\xed\xa0\x80", b"<|endoftext|>"])
            note = f"pre-token {index} = {tokens[index][:20]!r}"
        else:
            keep = sorted(rng.sample(range(len(tokens)), rng.choice([0, 1, 2, len(tokens) // 2])))
            tokens, counts = [tokens[i] for i in keep], [counts[i] for i in keep]
            note = f"keep {len(keep)} pre-tokens"
    elif op < 0.9:
        mutated, note = rng.choice(BYTE_MUTATORS[:4])(body, rng, [])
        raw_arrays = mutated
        note = "body: " + note + " (sizes and checksum fixed where they still fit)"
    else:
        mutated, note = rng.choice(BYTE_MUTATORS)(data, rng, [data])
        return mutated, "counts: " + note
    if raw_arrays is None or raw_arrays is True:
        if raw_arrays is None:
            offsets = [0]
            for token in tokens:
                offsets.append(offsets[-1] + len(token))
        payload = b"".join(tokens)
        body = struct.pack(f"<{len(offsets)}q", *offsets) + struct.pack(f"<{len(counts)}Q", *counts) + payload
        if fix:
            header["words"], header["data_bytes"] = len(counts), len(payload)
    else:
        body = raw_arrays
        if fix:
            header["data_bytes"] = max(0, len(body) - 8 - 16 * header["words"]) if isinstance(header["words"], int) else 0
    if fix:
        header["sha256"] = hashlib.sha256(body).hexdigest()
    header_bytes = dump_json(header).encode("utf-8", "surrogatepass")
    size = len(header_bytes) if stated_size is None else stated_size
    return PREAMBLE.pack(magic, version, size) + header_bytes + body, "counts: " + note


# ---- one mutant ------------------------------------------------------------------------------

STRUCTURED: dict[str, Callable[[bytes, random.Random], tuple[bytes, str]]] = {
    "polytok": json_mutant, "hf-bpe": json_mutant, "hf-wordpiece": json_mutant, "hf-unigram": json_mutant,
    "tiktoken": tiktoken_mutant, "sp-bpe": protobuf_mutant, "sp-unigram": protobuf_mutant, "counts": counts_mutant,
}


@dataclass
class Mutant:
    """A mutated file: which seed, what was done, its bytes, the name it is written under and
    which reader loads it."""

    seed: Seed
    note: str
    data: bytes
    name: str
    reader: str


def mutant_rng(run_seed: int, format_name: str, index: int) -> random.Random:
    return random.Random(f"{run_seed}/{format_name}/{index}")


def numbered_mutant(seeds: list[Seed], contents: dict[str, bytes], run_seed: int, format_name: str, index: int) -> Mutant:
    """The mutant `index` of `format_name`: the same for the same run seed and seed files."""
    return make_mutant(seeds, contents, format_name, mutant_rng(run_seed, format_name, index))


def make_mutant(seeds: list[Seed], contents: dict[str, bytes], format_name: str, rng: random.Random) -> Mutant:
    """A mutant of one of the seeds of `format_name`, drawn with `rng`."""
    mine = [seed for seed in seeds if seed.format == format_name]
    small = [seed for seed in mine if not seed.full] or mine
    full = [seed for seed in mine if seed.full]
    seed = rng.choice(full) if full and rng.random() < FULL_SHARE else rng.choice(small)
    data = contents[seed.name]
    if rng.random() < 0.7:
        try:
            data, note = STRUCTURED[format_name](data, rng)
        except (ValueError, IndexError, TypeError, KeyError, struct.error) as error:  # a seed this mutator cannot parse
            data, note = flip_bits(data, rng, [])[0], f"bytes: flip (structured mutation failed: {error})"
    else:
        others = [contents[other.name] for other in mine if not other.full]
        notes = []
        for _ in range(rng.choice([1, 1, 2, 4])):
            data, step = rng.choice(BYTE_MUTATORS)(data, rng, others)
            notes.append(step)
        note = "bytes: " + "; ".join(notes)
    suffix = Path(seed.name).suffix
    name = "mutant" + (suffix if rng.random() < 0.95 else rng.choice(["", ".json", ".model", ".tiktoken", ".ptc", ".txt"]))
    reader = "load" if rng.random() < 0.5 or format_name == "polytok" else "own"
    if format_name == "counts":
        reader = "own" if rng.random() < 0.9 else "load"
    return Mutant(seed, note, data, name, reader)


# ---- the worker ------------------------------------------------------------------------------

SAMPLE_TEXTS = ["Hello world, don't stop 1234567890!", "  New York  new york \t\n", "中文字符 🙂 👩‍👩‍👧 é e\u0301 ＡＢＣ ﬁ",
                "<|endoftext|>[SEP] a [MASK]b<s></s><unk> <|fim_prefix|>x<|endofprompt|>", "\u2581\u2581 <0x41> ##ing"]


def random_texts(rng: random.Random) -> list[str | bytes]:
    text = "".join(chr(rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0xD800), rng.randrange(0xE000, 0x110000)]))
                   for _ in range(rng.randrange(40)))
    return [text, rng.randbytes(rng.randrange(64))]


def exercise(tokenizer: Any, rng: random.Random) -> None:
    """Encodes texts with `tokenizer` as callers do and decodes the ids; polytok.Error is allowed."""
    import polytok

    specials = list(tokenizer.special_tokens)[:3]
    texts = SAMPLE_TEXTS + [f"a{special}b" for special in specials] + random_texts(rng)
    for text in texts:
        for options in ({}, {"allowed_special": "all"}, {"allowed_special": set(), "disallowed_special": ()}):
            try:
                ids = tokenizer.encode(text, **options)
                tokenizer.decode(ids)
            except polytok.Error:
                pass
    size = tokenizer.vocab_size
    for call in (lambda: tokenizer.decode([0, size - 1, size]), lambda: tokenizer.token_bytes(size - 1),
                 lambda: tokenizer.encode_batch(SAMPLE_TEXTS[:2], allowed_special="all", num_threads=1)):
        try:
            call()
        except polytok.Error:
            pass


def use_counts(counts: Any, rng: random.Random) -> None:
    """Reads a loaded counts file as a trainer does and trains a small BPE on it."""
    import polytok

    len(counts), counts.total
    for _, (word, number) in zip(range(20), counts):
        pass
    try:
        tokenizer = polytok.train(counts, algorithm="bpe", vocab_size=300, progress=False, num_threads=1)
        exercise(tokenizer, rng)
    except polytok.Error:
        pass


def run_mutant(mutant: Mutant, directory: Path, rng: random.Random) -> tuple[str, str]:
    """The outcome of one mutant in this process: ("ok" | "polytok.Error" | "other exception", detail)."""
    import polytok
    from polytok.counts import PreTokenCounts

    path = directory / mutant.name
    path.write_bytes(mutant.data)
    options = mutant.seed.options
    stage = "load"
    try:
        if mutant.seed.format == "counts" and mutant.reader == "own":
            loaded = PreTokenCounts.load(path)
            stage = "use"
            use_counts(loaded, rng)
            return "ok", ""
        if mutant.reader == "load" or mutant.seed.format == "polytok":  # polytok JSON has no reader of its own
            loaded = polytok.load(path, **options) if options else polytok.load(path)
        elif mutant.seed.format == "tiktoken":
            loaded = polytok.load_tiktoken(path, **options)
        elif mutant.seed.format.startswith("hf-"):
            loaded = polytok.load_huggingface(path)
        else:
            loaded = polytok.load_sentencepiece(path)
        stage = "encode"
        exercise(loaded, rng)
        return "ok", ""
    except polytok.Error as error:
        if stage != "load":  # exercise and use_counts catch what they expect; this one came from elsewhere
            return "other exception", f"{stage}: polytok.{type(error).__name__} escaped: {str(error)[:300]}"
        return "polytok.Error", type(error).__name__
    except Exception as error:  # noqa: BLE001  (what the fuzzer looks for)
        tail = "".join(traceback.format_exception(error)[-6:])[-1500:]
        return "other exception", f"{stage}: {type(error).__name__}: {str(error)[:300]}\n{tail}"


def read_message(stream: Any) -> Any:
    head = stream.read(4)
    if len(head) < 4:
        return None
    (length,) = struct.unpack("<I", head)
    return pickle.loads(stream.read(length))


def write_message(stream: Any, message: Any) -> None:
    data = pickle.dumps(message)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def worker_main(seeds_dir: Path, memory_gb: float, run_seed: int) -> None:
    """A worker: reads requests on stdin, (format, index) or a Mutant, and answers each with
    (outcome, detail, seconds)."""
    limit = int(memory_gb * (1 << 30))
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    warnings.simplefilter("ignore")
    seeds = read_seeds(seeds_dir)
    contents = {seed.name: (seeds_dir / seed.name).read_bytes() for seed in seeds}
    scratch = Path(tempfile.mkdtemp(prefix="fuzz-files-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # nothing else may write on the answer pipe
    import polytok  # noqa: F401  (imported before the first mutant is timed)

    try:
        while (request := read_message(stdin)) is not None:
            started = time.perf_counter()
            if not isinstance(request, tuple):  # a Mutant (its class may be fuzz_files.Mutant, not __main__'s)
                mutant, texts_seed = request, request.note
            else:
                format_name, index = request
                texts_seed = f"{run_seed}/{format_name}/{index}/texts"
                try:
                    mutant = numbered_mutant(seeds, contents, run_seed, format_name, index)
                except Exception:  # noqa: BLE001  (a bug of this script: the parent stops the run)
                    write_message(stdout, ("harness error", traceback.format_exc(), 0.0))
                    continue
            outcome, detail = run_mutant(mutant, scratch, random.Random(texts_seed))
            write_message(stdout, (outcome, detail, time.perf_counter() - started))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# ---- the parent ------------------------------------------------------------------------------

class Worker:
    """A persistent child process that runs mutants."""

    def __init__(self, seeds_dir: Path, memory_gb: float, run_seed: int):
        environment = dict(os.environ, MALLOC_ARENA_MAX="2", RAYON_NUM_THREADS="1")
        # stderr goes to a file (a pipe nobody reads would fill and stop the worker); its tail
        # says why a worker died
        self.stderr = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", str(seeds_dir), "--memory-gb", str(memory_gb),
             "--seed", str(run_seed)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, env=environment, bufsize=0)
        self.job: tuple[str, int] | None = None
        self.started = 0.0

    def send(self, job: tuple[str, int] | Mutant) -> None:
        self.job, self.started = job, time.monotonic()
        write_message(self.process.stdin, job)

    def collect(self) -> tuple[str, str, float]:
        """The outcome of the job sent, once the answer pipe is readable: the worker's answer, or
        "abort" when it died."""
        answer = read_message(self.process.stdout)
        if answer is None:
            code = self.process.wait()
            signal = f" (signal {-code})" if code < 0 else ""
            return "abort", f"worker exited with {code}{signal}\n{self.stderr_tail()}", time.monotonic() - self.started
        if answer[0] == "harness error":
            raise RuntimeError(f"making mutant {self.job} failed:\n{answer[1]}")
        return answer

    def ask(self, job: tuple[str, int] | Mutant, timeout: float) -> tuple[str, str, float]:
        """Runs one job and waits for its outcome; "hang" after `timeout` seconds, when the worker
        is killed (as it is after an abort: `alive` says whether it can take another job)."""
        self.send(job)
        ready, _, _ = select.select([self.process.stdout], [], [], timeout)
        if not ready:
            self.kill()
            return "hang", f"no answer in {timeout:g} s", timeout
        return self.collect()

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def stderr_tail(self) -> str:
        self.stderr.seek(max(0, self.stderr.seek(0, os.SEEK_END) - 2000))
        return self.stderr.read().decode("utf-8", "replace")

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout, self.stderr):
            stream.close()


@dataclass
class Tally:
    """Outcome counts of one format, and the time its mutants took."""

    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    seconds: float = 0.0
    slowest: float = 0.0


def save_finding(findings: Path, seeds: list[Seed], contents: dict[str, bytes], run_seed: int, job: tuple[str, int],
                 outcome: str, detail: str) -> Path:
    """Writes the mutant of `job` and a note of what it is and what happened under `findings`."""
    format_name, index = job
    mutant = numbered_mutant(seeds, contents, run_seed, format_name, index)
    findings.mkdir(parents=True, exist_ok=True)
    stem = f"{format_name}-{index}-{outcome.replace(' ', '-').replace('.', '-')}"
    (findings / f"{stem}{Path(mutant.name).suffix or '.bin'}").write_bytes(mutant.data)
    note = {"format": format_name, "index": index, "run_seed": run_seed, "seed_file": mutant.seed.name, "written_as": mutant.name,
            "reader": mutant.reader, "options": mutant.seed.options, "mutation": mutant.note, "outcome": outcome, "detail": detail}
    path = findings / f"{stem}.json"
    path.write_text(json.dumps(note, indent=1, ensure_ascii=False), encoding="utf-8")
    return path


def run(seeds_dir: Path, formats: list[str], per_format: int, workers: int, run_seed: int, timeout: float, memory_gb: float,
        findings: Path, quiet: bool, table_file: Path | None = None) -> dict[str, Tally]:
    """Runs `per_format` mutants of each format on `workers` workers; returns the tallies. The
    table so far is written to `table_file` every minute (a run stopped early leaves its count)."""
    from polytok.progress import progress_bar

    seeds = read_seeds(seeds_dir)
    contents = {seed.name: (seeds_dir / seed.name).read_bytes() for seed in seeds}
    # formats interleaved, so that a run stopped early has covered every one
    jobs = [(name, index) for index in range(per_format) for name in formats]
    jobs.reverse()
    tallies = {name: Tally() for name in formats}
    pool = [Worker(seeds_dir, memory_gb, run_seed) for _ in range(workers)]
    started = written = time.monotonic()

    def write_table() -> None:
        done = sum(sum(tally.counts.values()) for tally in tallies.values())
        table_file.write_text(f"{table(tallies)}\n\n{done:,} mutants in {time.monotonic() - started:,.0f} s, "
                              f"{workers} workers, seed {run_seed}\n", encoding="utf-8")

    def finish(worker: Worker, outcome: str, detail: str, seconds: float) -> None:
        tally = tallies[worker.job[0]]
        tally.counts[outcome] += 1
        tally.seconds += seconds
        tally.slowest = max(tally.slowest, seconds)
        if outcome not in ("ok", "polytok.Error"):
            saved = save_finding(findings, seeds, contents, run_seed, worker.job, outcome, detail)
            if not quiet:
                print(f"\n{outcome}: {worker.job[0]} #{worker.job[1]} -> {saved}\n  {detail.splitlines()[0] if detail else ''}",
                      file=sys.stderr)
        worker.job = None
        bar.update(1)

    try:
        with progress_bar(not quiet, total=len(jobs), unit="mutant", desc="fuzzing files") as bar:
            while jobs or any(worker.job for worker in pool):
                for index, worker in enumerate(pool):
                    if worker.job is None and jobs:
                        try:
                            worker.send(jobs.pop())
                        except (BrokenPipeError, OSError):
                            jobs.append(worker.job)
                            worker.kill()
                            pool[index] = Worker(seeds_dir, memory_gb, run_seed)
                busy = {worker.process.stdout.fileno(): worker for worker in pool if worker.job}
                deadline = min(worker.started for worker in busy.values()) + timeout
                ready, _, _ = select.select(list(busy), [], [], max(0.0, deadline - time.monotonic()))
                for descriptor in ready:
                    worker = busy[descriptor]
                    finish(worker, *worker.collect())
                    if not worker.alive:
                        worker.kill()
                        pool[pool.index(worker)] = Worker(seeds_dir, memory_gb, run_seed)
                now = time.monotonic()
                if table_file is not None and now - written > 60:
                    write_table()
                    written = now
                for position, worker in enumerate(pool):
                    if worker.job and worker not in [busy[d] for d in ready] and now - worker.started > timeout:
                        worker.kill()
                        finish(worker, "hang", f"no answer in {timeout:g} s", now - worker.started)
                        pool[position] = Worker(seeds_dir, memory_gb, run_seed)
    finally:
        for worker in pool:
            worker.kill()
        if table_file is not None:
            write_table()
    return tallies


def table(tallies: dict[str, Tally]) -> str:
    """The results as a Markdown table, one row per format; mutants/s is per worker (a mutant's
    own time: making, writing, loading and using it)."""
    header = ["format", "mutants", *OUTCOMES, "mutants/s", "slowest (s)"]
    rows = [header, ["---"] * len(header)]
    totals = Tally()
    for name, tally in [*tallies.items(), ("all", totals)]:
        if name != "all":
            for outcome in OUTCOMES:
                totals.counts[outcome] += tally.counts[outcome]
            totals.seconds += tally.seconds
            totals.slowest = max(totals.slowest, tally.slowest)
        total = sum(tally.counts.values())
        rate = f"{total / tally.seconds:,.0f}" if tally.seconds else "-"
        rows.append([name, f"{total:,}", *(f"{tally.counts[o]:,}" for o in OUTCOMES), rate, f"{tally.slowest:.2f}"])
    return "\n".join("| " + " | ".join(row) + " |" for row in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-format", type=int, default=100_000, help="mutants per format (default 100000)")
    parser.add_argument("--formats", default=",".join(FORMATS), help=f"comma-separated, of {', '.join(FORMATS)}")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="the run's seed: the same seed gives the same mutants")
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds a mutant may take before it counts as a hang")
    parser.add_argument("--memory-gb", type=float, default=3.0, help="each worker's address-space limit (RLIMIT_AS)")
    parser.add_argument("--seeds-dir", type=Path, help="where the seed files are, or are built if absent (default: a temporary directory)")
    parser.add_argument("--findings", type=Path, default=Path("fuzz-findings"), help="where bug mutants are saved")
    parser.add_argument("--table-file", type=Path, help="where the table so far is written every minute")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.worker:
        worker_main(arguments.worker, arguments.memory_gb, arguments.seed)
        return
    formats = [name.strip() for name in arguments.formats.split(",") if name.strip()]
    unknown = [name for name in formats if name not in FORMATS]
    if unknown or not formats:
        parser.error(f"unknown formats {unknown}; known: {', '.join(FORMATS)}")
    temporary = None
    seeds_dir = arguments.seeds_dir
    if seeds_dir is None:
        temporary = tempfile.mkdtemp(prefix="fuzz-files-seeds-")
        seeds_dir = Path(temporary)
    try:
        if not (seeds_dir / "seeds.json").exists():
            build_seeds(seeds_dir)
        started = time.monotonic()
        tallies = run(seeds_dir, formats, arguments.per_format, arguments.workers, arguments.seed, arguments.timeout,
                      arguments.memory_gb, arguments.findings, arguments.quiet, arguments.table_file)
        wall = time.monotonic() - started
    finally:
        if temporary:
            shutil.rmtree(temporary, ignore_errors=True)
    print(table(tallies))
    done = sum(sum(tally.counts.values()) for tally in tallies.values())
    print(f"\n{done:,} mutants in {wall:,.0f} s ({done / wall:,.0f}/s) on {arguments.workers} workers, seed {arguments.seed}, "
          f"RLIMIT_AS {arguments.memory_gb:g} GB, timeout {arguments.timeout:g} s")
    bad = sum(t.counts[o] for t in tallies.values() for o in OUTCOMES[2:])
    if bad:
        print(f"{bad} mutants were bugs; saved under {arguments.findings}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
