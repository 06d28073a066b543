"""Extending cl100k and o200k for a language they were not built for: bytes per token before and
after on text nobody trained on, the change on English, and the time, beside the two things a
user does today (HF tokenizers' `add_tokens` of the K most frequent pre-tokens, and a fresh BPE of
the same total size).

    python benchmarks/languages.py                  # once: the per-language halves
    python benchmarks/bench_extend.py [--bases cl100k_base o200k_base] [--sizes 1024 4096 16384]
                                      [--languages hi ko vi ja el tr km]

Each extension (and each baseline) learns on the language's tuning half; every number is measured
on its reporting half (benchmarks/languages.py), and English is the en-US reporting half. The
fresh BPE learns on the language's and English's tuning halves together, with the base's pattern.
With --bounds, `certify(..., base=)` bounds, on the reporting half, the token count of every
extension of the base by K tokens: the most bytes per token any of them reaches.

With --sentencepiece unigram|bpe, the base is instead a SentencePiece model of that type
(`spm_train` of --sp-size pieces, byte fallback, on the English tuning half; bpe is Llama's
recipe), extended by `extend(..., "unigram")` or by BPE continuation (characters first, then
merges); sentencepiece encodes the reporting halves with the saved model (after checking that
its ids equal polytok's), beside a fresh `spm_train` of the same type and total size on the
language's and English's tuning halves.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import polytok  # noqa: E402
from polytok.pretokenize import PreTokenizer  # noqa: E402

PRESET = {"cl100k_base": "cl100k", "o200k_base": "o200k"}


def load_base(name: str) -> polytok.Tokenizer:
    """The real OpenAI vocabulary `name` with its pattern and special tokens."""
    from bench_encode import rank_files

    sys.path.insert(0, str(HERE.parent / "tests"))
    from real_vocabularies import offline_tiktoken

    import tiktoken

    path = rank_files()[name]
    with offline_tiktoken(path.parent):
        specials = tiktoken.get_encoding(name)._special_tokens
    return polytok.load_tiktoken(path, pattern=PRESET[name], special_tokens=specials)


def bytes_per_token(tokenizer, texts: list[str]) -> tuple[float, int]:
    tokens = int(tokenizer.count_tokens(texts, disallowed_special=()).sum())
    return sum(len(text.encode("utf-8")) for text in texts) / tokens, tokens


def frequent_pre_tokens(base: polytok.Tokenizer, texts: list[str], k: int) -> list[str]:
    """The `k` most frequent pre-tokens that the base cuts into two or more tokens (what a user
    hands to `add_tokens`), as text."""
    counts: Counter = Counter()
    splitter = PreTokenizer(base.pattern)
    for text in texts:
        counts.update(splitter.split(text))
    chosen = []
    for piece, _ in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        text = piece.decode("utf-8", "replace")
        if text.strip() and len(base.encode_ordinary(text)) > 1:
            chosen.append(text)
            if len(chosen) == k:
                break
    return chosen


def first_megabytes(documents: list[str], megabytes: float | None) -> list[str]:
    """The first documents, up to `megabytes` of UTF-8 (all of them for None)."""
    if megabytes is None:
        return documents
    chosen, size = [], 0
    for document in documents:
        if size >= megabytes * 1e6:
            break
        chosen.append(document)
        size += len(document.encode("utf-8"))
    return chosen


def hf_added_tokens(base_file: Path, words: list[str], texts: list[str]) -> float:
    """Bytes per token of HF tokenizers' `add_tokens(words)` on top of the base, on `texts`."""
    import tokenizers

    hf = tokenizers.Tokenizer.from_file(str(base_file))
    hf.add_tokens(words)
    tokens = sum(len(encoding.ids) for encoding in hf.encode_batch(texts, add_special_tokens=False))
    return sum(len(text.encode("utf-8")) for text in texts) / tokens


def sentencepiece_rows(args: argparse.Namespace, halves: dict, english: list[str], english_tune: list[str]) -> None:
    """The --sentencepiece table: a SentencePiece base extended per language and size."""
    import io

    import languages
    import sentencepiece as spm

    def train(lines: list[str], size: int) -> bytes:
        model = io.BytesIO()
        spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=size,
                                       model_type=args.sentencepiece, byte_fallback=True, minloglevel=2,
                                       input_sentence_size=2_000_000, shuffle_input_sentence=False)
        return model.getvalue()

    def lines_of(documents: list[str]) -> list[str]:
        return [line for document in documents for line in document.splitlines() if line.strip()]

    def tokens(processor, lines: list[str]) -> int:
        return sum(map(len, processor.encode(lines)))

    english_lines, english_tune_lines = lines_of(english), lines_of(english_tune)
    english_bytes = sum(len(line.encode("utf-8")) for line in english_lines)
    with tempfile.TemporaryDirectory() as scratch:
        base_file = Path(scratch) / "base.model"
        base_file.write_bytes(train(english_tune_lines, args.sp_size))
        base = spm.SentencePieceProcessor(model_file=str(base_file))
        english_tokens = tokens(base, english_lines)
        print(f"SentencePiece {args.sentencepiece} base: {args.sp_size} pieces on the English tuning half "
              f"({english_bytes / english_tokens:.3f} bytes/token on English)")
        print("| language | K | bytes/token before | after | English change | extend s | fresh spm bytes/token | "
              "fresh English change | fresh spm s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for language in args.languages:
            tune = lines_of(languages.documents(halves[language]["tune"]))
            report = lines_of(languages.documents(halves[language]["report"]))
            report_bytes = sum(len(line.encode("utf-8")) for line in report)
            before = report_bytes / tokens(base, report)
            for k in args.sizes:
                start = time.perf_counter()
                extended = polytok.extend(base_file, polytok.texts(tune), k, args.sentencepiece, progress=False)
                seconds = time.perf_counter() - start
                out = Path(scratch) / "extended.model"
                extended.save_sentencepiece(out)
                theirs = spm.SentencePieceProcessor(model_file=str(out))
                if theirs.encode(report[:500]) != extended.encode_batch(report[:500]):
                    sys.exit(f"{language} K={k}: sentencepiece and polytok disagree on the extended model")
                after = report_bytes / tokens(theirs, report)
                change = 100 * (tokens(theirs, english_lines) - english_tokens) / english_tokens
                start = time.perf_counter()
                fresh = spm.SentencePieceProcessor(model_proto=train(tune + english_tune_lines, args.sp_size + k))
                fresh_seconds = time.perf_counter() - start
                fresh_change = 100 * (tokens(fresh, english_lines) - english_tokens) / english_tokens
                print(f"| {language} | {k} | {before:.3f} | {after:.3f} | {change:+.2f}% | {seconds:.1f} | "
                      f"{report_bytes / tokens(fresh, report):.3f} | {fresh_change:+.1f}% | {fresh_seconds:.1f} |",
                      flush=True)


def main() -> None:
    import languages

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bases", nargs="+", default=["cl100k_base", "o200k_base"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[1024, 4096, 16384])
    parser.add_argument("--languages", nargs="+", default=["hi", "ko", "vi", "ja", "el", "tr", "km"])
    parser.add_argument("--no-baselines", action="store_true", help="skip add_tokens and the fresh BPE")
    parser.add_argument("--algorithms", nargs="+", default=["bpe"], choices=["bpe", "convex"],
                        help="extension algorithms; each row names its algorithm after K")
    parser.add_argument("--bounds", action="store_true",
                        help="also certify, on the reporting half, the fewest tokens any K-token extension reaches")
    parser.add_argument("--bound-mb", type=float, default=None,
                        help="--bounds: certify the first documents of the reporting half, up to this many MB")
    parser.add_argument("--sentencepiece", choices=["unigram", "bpe"],
                        help="extend a SentencePiece base of this model type instead")
    parser.add_argument("--sp-size", type=int, default=8000, help="--sentencepiece: the base's pieces")
    args = parser.parse_args()
    halves = languages.build(2.0)
    missing = [language for language in args.languages + ["en-US"] if language not in halves]
    if missing:
        sys.exit(f"no benchmark text for {missing}: run benchmarks/languages.py after installing the packages it names")
    english = languages.documents(halves["en-US"]["report"])
    english_tune = languages.documents(halves["en-US"]["tune"])
    if args.sentencepiece:
        sentencepiece_rows(args, halves, english, english_tune)
        return
    print("| base | language | K | tune MB | bytes/token before | after | English change | count + extend s | "
          "add_tokens bytes/token | fresh BPE bytes/token | fresh BPE English change |"
          + (" bound: bytes/token no extension beats | gap | certify s |" if args.bounds else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|---|---|" if args.bounds else ""))
    for name in args.bases:
        base = load_base(name)
        english_before, english_tokens = bytes_per_token(base, english)
        with tempfile.TemporaryDirectory() as scratch:
            base_file = Path(scratch) / "base.json"
            if not args.no_baselines:
                base.save_huggingface(base_file)
            for language in args.languages:
                tune = languages.documents(halves[language]["tune"])
                report = languages.documents(halves[language]["report"])
                before, _ = bytes_per_token(base, report)
                for k, algorithm in ((k, algorithm) for k in args.sizes for algorithm in args.algorithms):
                    start = time.perf_counter()  # counting the tuning half included
                    extended = polytok.extend(base, polytok.texts(tune), k, algorithm, progress=False)
                    seconds = time.perf_counter() - start
                    after, _ = bytes_per_token(extended, report)
                    _, english_after = bytes_per_token(extended, english)
                    change = 100 * (english_after - english_tokens) / english_tokens
                    learned = extended.training["extended"]["new_tokens"]
                    size = f"{k}" if learned == k else f"{k} ({learned} learned)"
                    if args.algorithms != ["bpe"]:
                        size += f" {algorithm}"
                    baselines = "| | | |"
                    if not args.no_baselines:
                        added = hf_added_tokens(base_file, frequent_pre_tokens(base, tune, k), report)
                        fresh = polytok.train(polytok.texts(tune + english_tune), vocab_size=base.vocab_size + k,
                                              pattern=base.pattern, progress=False)
                        fresh_english = bytes_per_token(fresh, english)[1]
                        baselines = (f"| {added:.3f} | {bytes_per_token(fresh, report)[0]:.3f} | "
                                     f"{100 * (fresh_english - english_tokens) / english_tokens:+.1f}% |")
                    if args.bounds:
                        bounded = first_megabytes(report, args.bound_mb)
                        report_counts = polytok.count(polytok.texts(bounded), pattern=base.pattern,
                                                      special_tokens=list(base.special_tokens), progress=False)
                        start = time.perf_counter()
                        certificate = polytok.certify(extended, report_counts, base=base)
                        report_bytes = sum(len(text.encode("utf-8")) for text in bounded)
                        baselines += (f" {report_bytes / certificate.bound:.3f} | {certificate.gap:+.1f}% | "
                                      f"{time.perf_counter() - start:.0f} |")
                    tune_mb = sum(len(text.encode("utf-8")) for text in tune) / 1e6
                    print(f"| {name} | {language} | {size} | {tune_mb:.2f} | {before:.3f} | {after:.3f} | "
                          f"{change:+.2f}% | {seconds:.1f} {baselines}", flush=True)
        print(f"(English on {name}: {english_before:.3f} bytes/token)", flush=True)


if __name__ == "__main__":
    main()
