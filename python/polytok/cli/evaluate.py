"""`polytok eval`, `stability`, `compare` and `report`: measure tokenisers on a corpus, how much a
vocabulary depends on its training sample, tokenisers side by side across languages, and all of
it in one HTML page."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from polytok import checks
from polytok.files import atomic_write, read_json
from polytok.cli.options import (
    Command,
    add_corpus_options,
    add_output_options,
    add_tokenizer_format_options,
    load_tokenizers,
    pattern,
    reader_options,
)
from polytok.compare import COSTS, compare, format_comparison, read_texts, render_html, render_terminal
from polytok.metrics import evaluate
from polytok.report import build_report, write_report
from polytok.stability import stability
from polytok.tables import format_table, long_rows, to_csv

EVAL_EXAMPLES = """examples:
  polytok eval -t tok.json corpus.txt
  polytok eval -t bpe.json -t convex.json held-out/ --json
  polytok eval -t cl100k.tiktoken --pattern cl100k notes.txt --csv > metrics.csv"""

STABILITY_EXAMPLES = """examples:
  polytok stability --algorithm bpe --vocab-size 4096 --samples 5 --fraction 0.5 corpus.txt
  polytok stability -a convex -v 1280 -k 3 -f 0.25 --seed 7 corpus.txt --json"""

COMPARE_EXAMPLES = """examples:
  polytok compare bpe.json convex.json --text handbook-en-US.txt --text handbook-es-ES.txt
  polytok compare cl100k.tiktoken o200k.tiktoken --pattern cl100k --text es.txt en.txt --reference en
  polytok compare tok.json tokenizer.json --text a.txt --sample 'El niño juega en el jardín.' --json"""

REPORT_EXAMPLES = """examples:
  polytok report bpe.json convex.json --text handbook-en-US.txt handbook-es-ES.txt -o report.html
  polytok report cl100k.tiktoken o200k.tiktoken --pattern cl100k --text en.txt es.txt \\
      --corpus held-out/ --reference en -o report.html      # also report.json and report.csv
  polytok certify -t bpe.json corpus/ --budgets 8192,32768 --json > table2.json
  polytok report bpe.json --text en.txt --certificates table2.json -o report.html   # gap-vs-budget plot"""

TOKENIZER_FILES = "tokeniser files: polytok JSON, .tiktoken, HF tokenizer.json, SentencePiece .model"


def add_eval_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok eval -t TOK [-t TOK ...] CORPUS...`."""
    parser.add_argument(
        "-t", "--tokenizer", action="append", required=True,
        help="tokeniser file (polytok JSON, .tiktoken, HF tokenizer.json, SentencePiece .model); repeatable",
    )
    parser.add_argument("corpus", type=Path, nargs="+", help="text, .jsonl or .parquet files, directories or globs")
    parser.add_argument("--threads", type=int, default=None, help="encoder threads (default: all cores)")
    add_tokenizer_format_options(parser)
    add_output_options(parser)
    add_corpus_options(parser)


def run_eval(args: argparse.Namespace) -> None:
    """Print the intrinsic metrics of each tokeniser on the corpus."""
    tokenizers = load_tokenizers(args.tokenizer, args)
    results = {
        name: evaluate(tokenizer, list(args.corpus), num_threads=args.threads, progress=not args.quiet, **reader_options(args))
        for name, tokenizer in tokenizers.items()
    }
    if args.json:
        print(json.dumps(results, indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(long_rows(results, "tokenizer"), ["tokenizer", "metric", "value"]))
    else:
        print(format_table(results))


def add_stability_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok stability --algorithm A --vocab-size N --samples k --fraction f CORPUS...`."""
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("-a", "--algorithm", default="bpe", help="bpe, convex (and the others polytok.train knows)")
    parser.add_argument("-v", "--vocab-size", type=int, required=True, help="total vocabulary size")
    parser.add_argument("-k", "--samples", type=int, default=5, help="independent samples to train on (at least 2)")
    parser.add_argument("-f", "--fraction", type=float, default=0.5, help="probability that a line is in a sample")
    parser.add_argument("--unit", choices=["line", "document"], default="line", help="what a sample keeps or drops")
    parser.add_argument("--seed", type=int, default=0, help="seed of the samples")
    parser.add_argument("--pattern", default=checks.DEFAULT_PATTERN, help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    parser.add_argument("--special", action="append", default=[], help="special token (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON")
    add_corpus_options(parser)


def run_stability(args: argparse.Namespace) -> None:
    """Train on k samples and print the Jaccard similarities of their vocabularies."""
    result = stability(
        list(args.corpus),
        algorithm=args.algorithm,
        vocab_size=args.vocab_size,
        samples=args.samples,
        fraction=args.fraction,
        seed=args.seed,
        unit=args.unit,
        reader_options=reader_options(args),
        pattern=pattern(args.pattern),
        special_tokens=args.special,
        progress=not args.quiet,
    )
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(format_table({"stability": result}))
    print("\npairwise Jaccard similarity (all tokens):")
    for row in result["jaccard"]:
        print("  " + "  ".join(f"{value:.4f}" for value in row))


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok compare TOK... --text FILE... [--reference NAME] [--sample TEXT]`."""
    parser.add_argument("tokenizers", nargs="+", metavar="TOK", help=TOKENIZER_FILES)
    parser.add_argument("--text", nargs="+", action="extend", required=True, metavar="FILE",
                        help="UTF-8 text files, e.g. the same document in several languages")
    parser.add_argument("--reference", help="text (file stem) the tax is relative to (default: the first)")
    parser.add_argument("--cost", choices=COSTS, default="tokens",
                        help="cost of a text: tokens (parallel texts), tokens_per_byte, tokens_per_line")
    parser.add_argument("--sample", help="sentence to show cut by each tokeniser (default: first line of the reference)")
    parser.add_argument("--html", metavar="FILE", help="also write the sample's cuts as an HTML page")
    parser.add_argument("--color", choices=["auto", "always", "never"], default="auto", help="colour the cuts")
    parser.add_argument("--threads", type=int, default=None, help="encoder threads (default: all cores)")
    add_tokenizer_format_options(parser)
    add_output_options(parser)


def run_compare(args: argparse.Namespace) -> None:
    """Print the comparison table, the Gini coefficients and the sample's cuts."""
    tokenizers = load_tokenizers(args.tokenizers, args)
    comparison = compare(tokenizers, read_texts(args.text), reference=args.reference, cost=args.cost,
                         sample=args.sample, num_threads=args.threads)
    if args.html:
        with atomic_write(args.html) as stream:
            stream.write(
                "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>polytok compare</title></head>"
                f"<body>\n{render_html(comparison)}\n</body></html>\n"
            )
    if args.json:
        print(json.dumps(comparison, indent=2, ensure_ascii=False))
    elif args.csv:
        sys.stdout.write(to_csv(comparison["rows"], list(comparison["rows"][0])))
    else:
        colour = args.color == "always" or (args.color == "auto" and sys.stdout.isatty())
        print(format_comparison(comparison))
        print()
        print(render_terminal(comparison, colour=colour))


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok report TOK... --text FILE... [--corpus ...] -o report.html`."""
    parser.add_argument("tokenizers", nargs="+", metavar="TOK", help=TOKENIZER_FILES)
    parser.add_argument("--text", nargs="+", action="extend", required=True, metavar="FILE",
                        help="UTF-8 text files, e.g. the same document in several languages")
    parser.add_argument("--corpus", type=Path, nargs="+", action="extend", metavar="PATH",
                        help="corpus for the intrinsic metrics and statistics (default: the texts together)")
    parser.add_argument("-o", "--output", required=True, help="HTML file to write; .json and .csv go beside it")
    parser.add_argument("--reference", help="text (file stem) the tax is relative to (default: the first)")
    parser.add_argument("--cost", choices=COSTS, default="tokens",
                        help="cost of a text: tokens (parallel texts), tokens_per_byte, tokens_per_line")
    parser.add_argument("--sample", help="sentence to show cut by each tokeniser (default: first line of the reference)")
    parser.add_argument("--title", default="polytok report", help="title of the page")
    parser.add_argument("--lm", type=Path, metavar="FILE", help="results JSON of polytok lm-eval: adds a BpB-vs-vocabulary plot")
    parser.add_argument("--certificates", type=Path, metavar="FILE",
                        help="JSON of polytok certify --budgets ... --json: adds the bounds and the gap-vs-budget plot")
    parser.add_argument("--threads", type=int, default=None, help="encoder threads (default: all cores)")
    add_tokenizer_format_options(parser)
    add_corpus_options(parser)


def run_report(args: argparse.Namespace) -> None:
    """Build the report and write its HTML, JSON and CSV files."""
    tokenizers = load_tokenizers(args.tokenizers, args)
    report = build_report(
        tokenizers,
        read_texts(args.text),
        corpus=args.corpus,
        reference=args.reference,
        cost=args.cost,
        sample=args.sample,
        title=args.title,
        num_threads=args.threads,
        lm=None if args.lm is None else read_json(args.lm, "LM results"),
        certificates=None if args.certificates is None else read_json(args.certificates, "certificates"),
        **reader_options(args),
    )
    written = write_report(report, args.output)
    if not args.quiet:
        print("wrote " + ", ".join(str(path) for path in written), file=sys.stderr)


COMMANDS = {
    "eval": Command("Intrinsic metrics of tokenisers on a corpus (compression, entropy, ...).", EVAL_EXAMPLES,
                    add_eval_arguments, run_eval),
    "stability": Command("Train on sampled subsets and compare the vocabularies (Jaccard).", STABILITY_EXAMPLES,
                         add_stability_arguments, run_stability),
    "compare": Command("Tokenisers side by side on texts and languages: tokens, tax, parity.", COMPARE_EXAMPLES,
                       add_compare_arguments, run_compare),
    "report": Command("One self-contained HTML report with plots, plus JSON and CSV.", REPORT_EXAMPLES,
                      add_report_arguments, run_report),
}
