"""`polytok train`: a tokeniser from a corpus (default: the bundled one) or from saved counts;
`polytok extend`: an existing tokeniser continued on a corpus, its ids kept."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import polytok
from polytok import checks
from polytok import formats as polytok_formats
from polytok.cli.options import (
    Command,
    add_corpus_options,
    add_tokenizer_option,
    integer_list,
    load_tokenizer,
    pattern,
    reader_options,
)
from polytok.corpus import default_corpus
from polytok.errors import ConfigError
from polytok.formats.loaded import LoadedTokenizer

EXAMPLES = """examples:
  polytok train -o tok.json                         # BPE, 32768 tokens, bundled corpus
  polytok train corpus.txt -a bpe -v 50257 --special '<|endoftext|>' -o tok.json
  polytok train --counts counts.ptc -a convex -v 4096 --rounding det -o convex.json
  polytok train --counts counts.ptc -a convex -v 4352,8448 --solver dual -o convex-{vocab_size}.json
  polytok train corpus.txt -v 32768 -o tok.tiktoken --format tiktoken"""


def add_train_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok train [CORPUS... | --counts FILE] -o FILE`."""
    parser.add_argument("corpus", type=Path, nargs="*", help="corpus files, directories or globs; none: the bundled default corpus")
    parser.add_argument("--counts", help="a counts file from `polytok count` instead of a corpus")
    parser.add_argument("-o", "--output", required=True, help="tokeniser file to write")
    parser.add_argument("-a", "--algorithm", default="bpe", help="bpe, convex (and the others polytok.train knows)")
    parser.add_argument("-v", "--vocab-size", type=vocab_sizes, default=32768,
                        help="total vocabulary size, bytes and specials included; convex: several, comma-separated, "
                             "train one tokeniser each in one run (-o then needs {vocab_size})")
    parser.add_argument("--pattern", default=checks.DEFAULT_PATTERN, help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    parser.add_argument("--special", action="append", default=[], help="special token (repeatable); gets an id after the learned tokens")
    parser.add_argument("--min-frequency", type=int, default=None, help="BPE: stop when no pair is this frequent")
    parser.add_argument("--rounding", default=None, help="convex: det, bias, int or price")
    parser.add_argument("--solver", default=None, help="convex: auto, highs, pdlp, cuopt or dual (no LP: smoothed dual ascent)")
    parser.add_argument("--time-limit", type=float, default=None, help="convex: solver time limit in seconds")
    parser.add_argument("--max-token-bytes", type=int, default=None, help="convex: longest token considered")
    parser.add_argument("--memory-limit", default=None,
                        help="convex: stop before solving when the estimated peak exceeds this (e.g. 12G; default: the memory available)")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    add_format_option(parser)
    add_corpus_options(parser)


def add_format_option(parser: argparse.ArgumentParser, default: str | None = "polytok", note: str = "") -> None:
    """--format: which file format -o is written in."""
    parser.add_argument(
        "--format",
        choices=["polytok", "tiktoken", "huggingface", "sentencepiece"],
        default=default,
        help="file format to write" + note,
    )


def vocab_sizes(value: str) -> int | list[int]:
    """'32768' -> 32768, '4352,8448' -> [4352, 8448]."""
    sizes = integer_list(value, "--vocab-size takes an integer or comma-separated integers", "--vocab-size needs a size")
    return sizes[0] if len(sizes) == 1 and "," not in value else sizes


def run_train(args: argparse.Namespace) -> None:
    """Count the corpus (or load the counts), train and save in the asked format."""
    options = {
        name: value
        for name, value in {
            "min_frequency": args.min_frequency,
            "rounding": args.rounding,
            "solver": args.solver,
            "time_limit": args.time_limit,
            "max_token_bytes": args.max_token_bytes,
            "memory_limit": args.memory_limit,
            "num_threads": args.threads,
        }.items()
        if value is not None
    }
    several = isinstance(args.vocab_size, list)
    if several and "{vocab_size}" not in args.output:
        raise ConfigError(f"several vocab sizes write several files: -o needs '{{vocab_size}}' in it, got {args.output!r}")
    if args.counts:
        if args.corpus:
            raise ConfigError("give either a corpus or --counts, not both")
        source = polytok.PreTokenCounts.load(args.counts)
    else:
        # polytok.train checks every option before it counts the corpus.
        source = list(args.corpus) if args.corpus else default_corpus()
        options.update(pattern=pattern(args.pattern), **reader_options(args))
    trained = polytok.train(
        source,
        algorithm=args.algorithm,
        vocab_size=args.vocab_size,
        special_tokens=args.special,
        progress=not args.quiet,
        **options,
    )
    for tokenizer in trained if several else [trained]:
        output = args.output.replace("{vocab_size}", str(tokenizer.vocab_size))
        polytok_formats.save(tokenizer, output, args.format)
        if not args.quiet:
            print(f"{args.algorithm} tokeniser, {tokenizer.vocab_size:,} tokens -> {output}", file=sys.stderr)


EXTEND_EXAMPLES = """examples:
  polytok extend -t cl100k_base.tiktoken --pattern cl100k hindi/*.txt -k 4096 -o cl100k-hi.json
  polytok extend -t tok.json --counts ko.ptc -k 1024 -o tok-ko.tiktoken --format tiktoken
  polytok extend -t tok.json ko/ -k 1024 -a convex -o tok-ko-convex.json   # with the bound for any extension"""


def add_extend_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok extend -t BASE [CORPUS... | --counts FILE] -k N -o FILE`."""
    add_tokenizer_option(parser)
    parser.add_argument("corpus", type=Path, nargs="*", help="corpus files, directories or globs")
    parser.add_argument("--counts", help="a counts file from `polytok count`, made with the base's pattern")
    parser.add_argument("-k", "--new-tokens", type=int, required=True, help="how many tokens to learn")
    parser.add_argument("-a", "--algorithm", default="bpe",
                        help="bpe (continue the base's merges), convex (ConvexTok with the base's tokens fixed) or "
                             "unigram (EM with the base's pieces fixed: a polytok, SentencePiece or HF tokenizer.json Unigram "
                             "base)")
    parser.add_argument("--rounding", default="det", help="convex: det, bias or int")
    parser.add_argument("--add-missing-bytes", action="store_true",
                        help="give a base without byte fallback (a SentencePiece model, or a HF tokenizer.json with "
                             "an unknown token) the 256 byte pieces first")
    parser.add_argument("--character-coverage", type=float, default=0.9995,
                        help="bpe on a character-level file: add the characters it spells in bytes that cover this "
                             "share of their occurrences, before merges")
    parser.add_argument("-o", "--output", required=True, help="tokeniser file to write")
    parser.add_argument("--min-frequency", type=int, default=1, help="stop when no pair is this frequent")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    add_format_option(parser, None, " (default: the base's own format where it keeps its file's pipeline, else polytok)")
    add_corpus_options(parser)


def run_extend(args: argparse.Namespace) -> None:
    """Load the base, count the corpus (or load the counts) with its pattern, extend and save."""
    if bool(args.counts) == bool(args.corpus):
        raise ConfigError("give either corpus files or --counts (one of them, not both)")
    if args.algorithm == "convex" and args.format not in (None, "polytok"):
        # said before the solve, not after it: neither format has a shortest-path segmenter
        raise ConfigError(f"a ConvexTok extension cuts by shortest path, which --format {args.format} cannot hold; "
                          "write it as polytok JSON (--format polytok)")
    base = load_tokenizer(args)
    own_format = base.pipeline.file_format if isinstance(base, LoadedTokenizer) else None
    if own_format and args.format not in (None, own_format):
        # said before the training, not after it: the extension keeps the base file's pipeline
        raise ConfigError(f"the base keeps its {base.pipeline.kind} pipeline, and so does its extension, which saves "
                          f"as --format {own_format} only, not {args.format}")
    if args.counts:
        source, options = polytok.PreTokenCounts.load(args.counts), {}
    else:
        source, options = list(args.corpus), reader_options(args)
    extended = polytok.extend(base, source, args.new_tokens, args.algorithm, min_frequency=args.min_frequency,
                              rounding=args.rounding, add_missing_bytes=args.add_missing_bytes,
                              character_coverage=args.character_coverage,
                              num_threads=args.threads, progress=not args.quiet, **options)
    file_format = args.format or own_format or "polytok"
    polytok_formats.save(extended, args.output, file_format)
    if not args.quiet:
        print(f"{args.tokenizer} + {extended.n_vocab - base.n_vocab:,} ids (from {base.n_vocab:,}) -> {args.output}",
              file=sys.stderr)


COMMANDS = {
    "train": Command("Train a tokeniser on a corpus (default: the bundled corpus).", EXAMPLES,
                     add_train_arguments, run_train),
    "extend": Command("Extend a tokeniser with tokens learned on a corpus; every existing id is kept.", EXTEND_EXAMPLES,
                      add_extend_arguments, run_extend),
}
