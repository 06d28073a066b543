"""Fuzzing the encoders at volume (a script, not CI): random inputs through every segmenter and
the real o200k/cl100k ranks, checking on each input

- the round trip (decode of the ids gives the input back, with and without special tokens);
- cache on == cache off (the default cache, one of 16 pieces that is emptied all the time, none);
- batch == single calls (inputs go through `encode_batch` on 2 threads in groups of 200);
- for the real vocabularies, the ids equal tiktoken's (text inputs).

Inputs, in turn: random bytes (invalid UTF-8 included); random Unicode mixed with special-token
look-alikes; long runs of one character or a short unit; mixed scripts (Latin, Cyrillic, Arabic,
Devanagari, CJK, emoji). Prints the number of cases, failures (the first few in full) and the time.

    python benchmarks/fuzz_roundtrip.py --cases 1000000 [--seed 0]
"""
from __future__ import annotations

import argparse
import random
import sys
import time
import unicodedata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_encode  # noqa: E402  (the tokenisers the encoding benchmark uses)

from polytok.tokenizer import Tokenizer  # noqa: E402

BATCH = 200
SPECIAL_LOOKALIKES = ["<|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>", "<|fim_middle|>", "<|", "|>", "<|endof",
                      "endoftext", "<|endoftext|", "<<|endoftext|>>", "<|im_start|>"]
SCRIPTS = {
    "latin": "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZéèàüöäßçñÉÜſǅ",
    "cyrillic": "абвгдеёжзийклмнопрстуфхцчшщъыьэюяАБВГДЕЖЗИЙКЛМН",
    "arabic": "ابتثجحخدذرزسشصضطظعغفقكلمنهوي١٢٣ًٌٍَُِّ",
    "devanagari": "अआइईउऊऋएऐओऔकखगघङचछजझञटठडढणतथदधनपफबभमयरलवशषसहािीुूेैोौं्०१२",
    "cjk": "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系计或司利受光王果亲界及今京务制解各任至清物台象记边共风战干接它许八特觉望直服毛林题建南度统色字请交爱让认算论百吃义科怎元社术结六功指思非流每青管夫连远资队跟带花快条院变联言权往展该领传近留红治决周保达办运武半候七必城父强步完革深区即求品士转量空甚众技轻程告江语英基派满式李息写呢识极令黄德收脸钱党倒未持取设始版双历越史商千片容研像找友孩站广改议形委早房音火际则首单亚",
    "emoji": "🙂😀🎉👍🏽👨‍👩‍👧🇩🇪❤️✨🔥💯🚀",
    "common": "     \n\n\r\n\t0123456789.,;:!?'\"()[]{}-_/\\@#$%^&*+=<>|~`'s're'LL",
}
RUN_UNITS = ["a", " ", "^", "\n", "🙂", "中", "1", "ab", " a", "é", "\r\n", "A", "'s", "\t", "\u00a0", "ـ", "्", "0 "]


def assigned(code_point: int) -> bool:
    """Whether Python's Unicode tables assign the code point (tiktoken's regex engine and polytok's
    tables, generated from a newer Unicode, agree on those)."""
    return unicodedata.category(chr(code_point)) not in ("Cn", "Cs", "Co")


def random_bytes(rng: random.Random) -> bytes:
    length = rng.choice([rng.randrange(8), rng.randrange(64), rng.randrange(300)])
    if rng.random() < 0.5:
        return rng.randbytes(length)
    # UTF-8 lead and continuation bytes, more often cut in the middle of a character.
    alphabet = b"ab \n\x80\xbf\xc3\xa9\xe4\xb8\xad\xf0\x9f\x99\x82\xff\xc0\xed\xa0"
    return bytes(rng.choice(alphabet) for _ in range(length))


def random_unicode(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randrange(20)):
        if rng.random() < 0.25:
            parts.append(rng.choice(SPECIAL_LOOKALIKES))
            continue
        for _ in range(rng.randrange(1, 6)):
            while True:
                code_point = rng.choice([rng.randrange(0x80), rng.randrange(0x800), rng.randrange(0x10000), rng.randrange(0x110000)])
                if assigned(code_point):
                    break
            parts.append(chr(code_point))
    return "".join(parts)


def long_run(rng: random.Random) -> str:
    unit = rng.choice(RUN_UNITS)
    count = int(10 ** rng.uniform(1, 3.7))
    text = unit * count
    return rng.choice(["", "x", " ", "\n", "Hello"]) + text + rng.choice(["", "x", " ", "\n", "!"])


def mixed_scripts(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randrange(1, 30)):
        script = SCRIPTS[rng.choice(list(SCRIPTS))]
        words.append("".join(rng.choice(script) for _ in range(rng.randrange(1, 10))))
    return "".join(rng.choice(["", " ", " ", "\n", ", "]) + word for word in words)


GENERATORS = [random_bytes, random_unicode, long_run, mixed_scripts]


class Checker:
    """One tokeniser with its cache variants, and optionally tiktoken's encoding of the same ranks."""

    def __init__(self, label: str, tokenizer: Tokenizer, tiktoken_encoding=None):
        self.label = label
        self.tokenizer = tokenizer
        self.variants = [
            Tokenizer(tokenizer.vocab, segmenter=tokenizer.segmenter, pattern=tokenizer.pattern,
                      special_tokens=tokenizer.special_tokens, merges=tokenizer.merges, scores=tokenizer.scores,
                      continuation_marker=tokenizer.continuation_marker, cache_size=size)
            for size in (16, 0)
        ]
        self.tiktoken = tiktoken_encoding
        self.failures: list[str] = []
        self.failed = 0

    def fail(self, what: str, case) -> None:
        self.failed += 1
        if len(self.failures) < 5:
            self.failures.append(f"{self.label}: {what} on {case[:200]!r} (length {len(case)})")

    def check(self, case: str | bytes) -> list[int]:
        ours = self.tokenizer.encode_ordinary(case)
        expected = case.encode("utf-8") if isinstance(case, str) else case
        if self.tokenizer.decode_bytes(ours) != expected:
            self.fail("round trip", case)
        if any(variant.encode_ordinary(case) != ours for variant in self.variants):
            self.fail("cache on != cache off", case)
        if isinstance(case, str):
            with_specials = self.tokenizer.encode(case, allowed_special="all")
            if self.tokenizer.decode(with_specials) != case:
                self.fail("round trip with special tokens", case)
            if self.variants[1].encode(case, allowed_special="all") != with_specials:
                self.fail("cache on != cache off with special tokens", case)
            if self.tiktoken is not None:
                if self.tiktoken.encode_ordinary(case) != ours:
                    self.fail("ids differ from tiktoken's", case)
                if self.tiktoken.encode(case, allowed_special="all") != with_specials:
                    self.fail("ids with special tokens differ from tiktoken's", case)
        return ours

    def check_batch(self, cases: list, singles: list[list[int]]) -> None:
        if self.tokenizer.encode_ordinary_batch(cases, num_threads=2) != singles:
            for case, single in zip(cases, singles):
                if self.tokenizer.encode_ordinary_batch([case], num_threads=2) != [single]:
                    self.fail("batch != single", case)


def checkers() -> list[Checker]:
    built = []
    for vocab in ("o200k", "cl100k"):
        built.append(Checker(f"merges {vocab}", bench_encode.polytok_tokenizer(vocab), bench_encode.tiktoken_encoding(vocab)))
    for label, tokenizer in bench_encode.trained_tokenizers().items():
        built.append(Checker(label, tokenizer))
    return built


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=10000, help="random inputs (each goes through every tokeniser)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    all_checkers = checkers()
    print(f"{args.cases} inputs through {', '.join(checker.label for checker in all_checkers)}", flush=True)
    start = time.perf_counter()
    done = 0
    while done < args.cases:
        cases = [GENERATORS[(done + i) % len(GENERATORS)](rng) for i in range(min(BATCH, args.cases - done))]
        for checker in all_checkers:
            checker.check_batch(cases, [checker.check(case) for case in cases])
        done += len(cases)
        if done % 50000 < BATCH:
            failed = sum(checker.failed for checker in all_checkers)
            print(f"  {done} cases, {failed} failures, {time.perf_counter() - start:.0f} s", flush=True)
    elapsed = time.perf_counter() - start
    failed = sum(checker.failed for checker in all_checkers)
    for checker in all_checkers:
        for failure in checker.failures:
            print(failure)
    print(f"{done} cases x {len(all_checkers)} tokenisers: {failed} failures in {elapsed:.0f} s (seed {args.seed})")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
