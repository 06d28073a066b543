"""The `polytok` command line: count, train, encode, decode, info and certify.

Every command reports bad input as one line on stderr and exits non-zero; output files are
written to a temporary file and renamed, so a failed run never leaves half a file behind.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Sequence

import polytok
from polytok.errors import Error
from polytok.metrics import add_corpus_options, add_tokenizer_format_options, reader_options

EXAMPLES = {
    "count": """examples:
  polytok count corpus.txt -o counts.ptc
  polytok count data/ --pattern o200k --special '<|endoftext|>' -o counts.ptc
  polytok count shard-*.jsonl.zst --text-field content -o counts.ptc""",
    "train": """examples:
  polytok train -o tok.json                         # BPE, 32768 tokens, bundled corpus
  polytok train corpus.txt -a bpe -v 50257 --special '<|endoftext|>' -o tok.json
  polytok train --counts counts.ptc -a convex -v 4096 --rounding det -o convex.json
  polytok train corpus.txt -v 32768 -o tok.tiktoken --format tiktoken""",
    "encode": """examples:
  echo 'Hello world' | polytok encode -t tok.json
  polytok encode -t tok.json --output tokens notes.txt
  polytok encode -t tok.json --output count --allow-special all < prompts.txt""",
    "decode": """examples:
  echo '9906 1917' | polytok decode -t tok.json
  polytok encode -t tok.json a.txt | polytok decode -t tok.json""",
    "info": """examples:
  polytok info -t tok.json
  polytok info -t tok.json --json""",
    "certify": """examples:
  polytok certify -t tok.json corpus.txt
  polytok certify -t cl100k.tiktoken --pattern cl100k corpus.txt --json""",
}


# Commands whose arguments and work live in their own module (add_NAME_arguments, run_NAME,
# EXAMPLES[NAME]). importlib, because `polytok.compare` the attribute is the function.
EXTERNAL_COMMANDS = {
    name: (importlib.import_module(f"polytok.{module}"), help_text)
    for name, module, help_text in [
        ("eval", "metrics", "Intrinsic metrics of tokenisers on a corpus (compression, entropy, ...)."),
        ("stability", "metrics", "Train on sampled subsets and compare the vocabularies (Jaccard)."),
        ("stats", "metrics", "Corpus statistics: words, Zipf, Heaps, OOV, bytes against characters."),
        ("compare", "compare", "Tokenisers side by side on texts and languages: tokens, tax, parity."),
        ("report", "report", "One self-contained HTML report with plots, plus JSON and CSV."),
    ]
}


def _command(subparsers, name: str, help_text: str, epilog: str) -> argparse.ArgumentParser:
    parser = subparsers.add_parser(
        name,
        help=help_text,
        description=help_text,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    # Accepted after the command too (`polytok train -q ...`); SUPPRESS keeps the global value.
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
    return parser


def _add_tokenizer_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-t", "--tokenizer", required=True, help="tokeniser file (polytok JSON, .tiktoken, ...)")
    add_tokenizer_format_options(parser)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command, with examples in each command's --help."""
    parser = argparse.ArgumentParser(
        prog="polytok",
        description="Build, apply, certify and compare tokenisers.",
        epilog="Run `polytok COMMAND --help` for the options and examples of each command.",
    )
    parser.add_argument("--version", action="version", version=f"polytok {polytok.__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    count = _command(subparsers, "count", "Count the pre-tokens of a corpus into a reusable counts file.", EXAMPLES["count"])
    count.add_argument("corpus", type=Path, nargs="+", help="text, .jsonl or .parquet files (optionally .gz/.zst), directories or globs")
    count.add_argument("-o", "--output", required=True, help="counts file to write")
    count.add_argument("--pattern", default="cl100k", help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    count.add_argument("--special", action="append", default=[], help="special token to split out (repeatable)")
    count.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    add_corpus_options(count)

    train = _command(subparsers, "train", "Train a tokeniser on a corpus (default: the bundled corpus).", EXAMPLES["train"])
    train.add_argument("corpus", type=Path, nargs="*", help="corpus files, directories or globs; none: the bundled default corpus")
    train.add_argument("--counts", help="a counts file from `polytok count` instead of a corpus")
    train.add_argument("-o", "--output", required=True, help="tokeniser file to write")
    train.add_argument("-a", "--algorithm", default="bpe", help="bpe, convex (and the others polytok.train knows)")
    train.add_argument("-v", "--vocab-size", type=int, default=32768, help="total vocabulary size, bytes and specials included")
    train.add_argument("--pattern", default="cl100k", help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    train.add_argument("--special", action="append", default=[], help="special token (repeatable); gets an id after the learned tokens")
    train.add_argument("--min-frequency", type=int, default=None, help="BPE: stop when no pair is this frequent")
    train.add_argument("--rounding", default=None, help="convex: det, bias, int or price")
    train.add_argument("--solver", default=None, help="convex: auto, highs, pdlp, cuopt or dual (no LP: smoothed dual ascent)")
    train.add_argument("--time-limit", type=float, default=None, help="convex: solver time limit in seconds")
    train.add_argument("--max-token-bytes", type=int, default=None, help="convex: longest token considered")
    train.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    train.add_argument(
        "--format",
        choices=["polytok", "tiktoken", "huggingface"],
        default="polytok",
        help="file format to write",
    )
    add_corpus_options(train)

    encode = _command(subparsers, "encode", "Encode text, one output line per input line (stdin when no file).", EXAMPLES["encode"])
    _add_tokenizer_option(encode)
    encode.add_argument("files", nargs="*", help="text files; none: standard input")
    encode.add_argument(
        "--output",
        choices=["ids", "tokens", "count"],
        default="ids",
        help="space-separated ids, token strings (JSON-escaped), or the number of tokens",
    )
    encode.add_argument(
        "--allow-special",
        action="append",
        default=[],
        help="special token allowed in the input ('all' for every one); others are an error",
    )
    encode.add_argument("--ordinary", action="store_true", help="treat special-token text as ordinary text")

    decode = _command(subparsers, "decode", "Decode lines of space-separated ids back into text.", EXAMPLES["decode"])
    _add_tokenizer_option(decode)
    decode.add_argument("files", nargs="*", help="files of ids; none: standard input")

    info = _command(subparsers, "info", "Describe a tokeniser file.", EXAMPLES["info"])
    _add_tokenizer_option(info)
    info.add_argument("--json", action="store_true", help="print JSON")

    certify = _command(subparsers, "certify", "Lower-bound the token count any same-size vocabulary can reach.", EXAMPLES["certify"])
    _add_tokenizer_option(certify)
    certify.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    certify.add_argument("--solver", default="auto", help="auto, highs, pdlp, cuopt or dual (no LP: smoothed dual ascent)")
    certify.add_argument("--time-limit", type=float, default=None, help="solver time limit in seconds")
    certify.add_argument("--json", action="store_true", help="print the certificate as JSON")
    add_corpus_options(certify)
    for name, (module, help_text) in EXTERNAL_COMMANDS.items():
        module_parser = _command(subparsers, name, help_text, module.EXAMPLES[name])
        getattr(module, f"add_{name}_arguments")(module_parser)
    return parser


def _pattern(value: str | None) -> str | None:
    return None if value is not None and value.lower() == "none" else value


def _load_tokenizer(args: argparse.Namespace) -> "polytok.Tokenizer":
    options = {}
    if args.pattern is not None:
        options["pattern"] = _pattern(args.pattern)
    if args.special:
        options["special_tokens"] = args.special
    return polytok.load(args.tokenizer, **options)


def _input_lines(files: Sequence[str]):
    """Lines of the named files, or of stdin, without their line ends; read as UTF-8 with surrogates kept."""
    if not files:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\n")
        return
    for name in files:
        try:
            stream = open(name, "rb")
        except OSError as error:
            raise polytok.errors.CorpusError(f"cannot read {name}: {error.strerror}") from None
        with stream:
            for line in stream:
                yield line.rstrip(b"\n")


def _corpus(args: argparse.Namespace):
    return list(args.corpus) if args.corpus else polytok.corpus.default_corpus()


def run_count(args: argparse.Namespace) -> None:
    counts = polytok.count(
        args.corpus,
        pattern=_pattern(args.pattern),
        special_tokens=args.special,
        num_threads=args.threads,
        progress=not args.quiet,
        **reader_options(args),
    )
    counts.save(args.output)
    if not args.quiet:
        print(f"{len(counts):,} unique pre-tokens, {counts.total:,} in all -> {args.output}", file=sys.stderr)


def run_train(args: argparse.Namespace) -> None:
    options = {
        name: value
        for name, value in {
            "min_frequency": args.min_frequency,
            "rounding": args.rounding,
            "solver": args.solver,
            "time_limit": args.time_limit,
            "max_token_bytes": args.max_token_bytes,
            "num_threads": args.threads,
        }.items()
        if value is not None
    }
    if args.counts:
        if args.corpus:
            raise polytok.errors.ConfigError("give either a corpus or --counts, not both")
        source = polytok.WordCounts.load(args.counts)
    else:
        source = polytok.count(
            _corpus(args),
            pattern=_pattern(args.pattern),
            special_tokens=args.special,
            num_threads=args.threads,
            progress=not args.quiet,
            text_field=args.text_field,
            text_column=args.text_column,
            errors=args.errors,
        )
    tokenizer = polytok.train(
        source,
        algorithm=args.algorithm,
        vocab_size=args.vocab_size,
        special_tokens=args.special,
        progress=not args.quiet,
        **options,
    )
    if args.format == "tiktoken":
        tokenizer.save_tiktoken(args.output)
    elif args.format == "huggingface":
        tokenizer.save_huggingface(args.output)
    else:
        tokenizer.save(args.output)
    if not args.quiet:
        print(f"{args.algorithm} tokeniser, {tokenizer.vocab_size:,} tokens -> {args.output}", file=sys.stderr)


def run_encode(args: argparse.Namespace) -> None:
    tokenizer = _load_tokenizer(args)
    allowed = "all" if "all" in args.allow_special else set(args.allow_special)
    out = sys.stdout
    for line in _input_lines(args.files):
        text = line.decode("utf-8", "surrogateescape")
        if args.ordinary:
            ids = tokenizer.encode_ordinary(text)
        else:
            ids = tokenizer.encode(text, allowed_special=allowed)
        if args.output == "ids":
            out.write(" ".join(map(str, ids)) + "\n")
        elif args.output == "count":
            out.write(f"{len(ids)}\n")
        else:
            pieces = [tokenizer.token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]
            out.write(json.dumps(pieces, ensure_ascii=False) + "\n")


def run_decode(args: argparse.Namespace) -> None:
    tokenizer = _load_tokenizer(args)
    out = sys.stdout.buffer
    for number, line in enumerate(_input_lines(args.files), start=1):
        try:
            ids = [int(field) for field in line.split()]
        except ValueError:
            raise polytok.errors.DecodeError(
                f"line {number}: expected space-separated integer ids, got {line[:40]!r}"
            ) from None
        out.write(tokenizer.decode_bytes(ids) + b"\n")


def run_info(args: argparse.Namespace) -> None:
    tokenizer = _load_tokenizer(args)
    description = tokenizer.info()
    if args.json:
        print(json.dumps(description, indent=2, ensure_ascii=False))
        return
    for key, value in description.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        print(f"{key:>22}: {value}")


def run_certify(args: argparse.Namespace) -> None:
    tokenizer = _load_tokenizer(args)
    certificate = polytok.certify(
        tokenizer,
        args.corpus,
        solver=args.solver,
        time_limit=args.time_limit,
        progress=not args.quiet,
    )
    if args.json:
        print(json.dumps(certificate.to_dict(), indent=2))
    else:
        print(certificate.summary())


COMMANDS = {
    "count": run_count,
    "train": run_train,
    "encode": run_encode,
    "decode": run_decode,
    "info": run_info,
    "certify": run_certify,
    **{name: getattr(module, f"run_{name}") for name, (module, _) in EXTERNAL_COMMANDS.items()},
}


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `polytok` script; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        COMMANDS[args.command](args)
    except Error as error:
        print(f"polytok {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
