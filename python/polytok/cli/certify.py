"""`polytok certify`: the certified lower bound on the token count of any vocabulary of the
tokeniser's size on a corpus, and how far the tokeniser is from it."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from polytok.certify import certify
from polytok.cli.options import Command, add_corpus_options, add_tokenizer_option, load_tokenizer, reader_options

EXAMPLES = """examples:
  polytok certify -t tok.json corpus.txt
  polytok certify -t cl100k.tiktoken --pattern cl100k corpus.txt --json"""


def add_certify_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok certify -t FILE CORPUS... [--solver S] [--json]`."""
    add_tokenizer_option(parser)
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("--solver", default="auto", help="auto, highs, pdlp, cuopt or dual (no LP: smoothed dual ascent)")
    parser.add_argument("--time-limit", type=float, default=None, help="solver time limit in seconds")
    parser.add_argument("--json", action="store_true", help="print the certificate as JSON")
    add_corpus_options(parser)


def run_certify(args: argparse.Namespace) -> None:
    """Certify the tokeniser on the corpus and print the certificate."""
    tokenizer = load_tokenizer(args)
    certificate = certify(
        tokenizer,
        args.corpus,
        solver=args.solver,
        time_limit=args.time_limit,
        progress=not args.quiet,
        **reader_options(args),
    )
    if args.json:
        print(json.dumps(certificate.to_dict(), indent=2))
    else:
        print(certificate.summary())


COMMANDS = {
    "certify": Command("Lower-bound the token count any same-size vocabulary can reach.", EXAMPLES,
                       add_certify_arguments, run_certify),
}
