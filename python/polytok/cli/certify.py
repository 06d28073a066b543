"""`polytok certify`: the certified lower bound on the token count of any vocabulary of the
tokeniser's size on a corpus, and how far the tokeniser is from it; with `--budgets`, the same
for each prefix of a BPE merge list, as the paper's Table 2."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from polytok.certify import certify, certify_table, stopped_early
from polytok.cli.options import (Command, add_corpus_options, add_tokenizer_option, integer_list, load_tokenizer,
                                 load_tokenizers, reader_options)
from polytok.errors import ConfigError
from polytok.files import atomic_write
from polytok.report import plot_gap_vs_budget
from polytok.tables import format_table

EXAMPLES = """examples:
  polytok certify -t tok.json corpus.txt
  polytok certify -t cl100k.tiktoken --pattern cl100k corpus.txt --json
  polytok certify -t bpe.json corpus.txt --solver dual --budgets 8192,16384,32768,65536
  polytok certify -t cl100k-hi.json --base cl100k_base.tiktoken --pattern cl100k hi/   # every extension by K"""

def add_certify_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok certify -t FILE CORPUS... [--solver S] [--budgets K,...] [--json]`."""
    add_tokenizer_option(parser)
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("--solver", default="auto", help="auto, highs, pdlp, cuopt or dual (no LP: smoothed dual ascent)")
    parser.add_argument("--budgets", type=budget_list, default=None,
                        help="comma-separated K: certify the first K merges of a BPE tokeniser for each, in one run, "
                             "and print bound, BPE, Det, Bias and Int as %% of the bound")
    parser.add_argument("--time-limit", type=float, default=None,
                        help="solver time limit in seconds (the bound stays valid, only weaker)")
    parser.add_argument("--max-token-bytes", type=int, default=None,
                        help="solve over tokens of at most this many bytes: less memory; the bound still covers every "
                             "vocabulary (longer tokens priced on the fly), a little weaker")
    parser.add_argument("--memory-limit", default=None,
                        help="stop before starting when the estimated peak exceeds this (e.g. 12G; default: the memory available)")
    parser.add_argument("--plot", type=Path, default=None,
                        help="with --budgets: write the gap-vs-budget plot (PNG) to this file")
    parser.add_argument("--base", default=None,
                        help="a tokeniser that -t extends: bound every extension of it by as many tokens (dual solver)")
    parser.add_argument("--json", action="store_true", help="print the certificate(s) as JSON")
    add_corpus_options(parser)


def budget_list(value: str) -> list[int]:
    """'8192,16384' -> [8192, 16384]."""
    return integer_list(value, "--budgets takes comma-separated integers", "--budgets needs at least one budget")


def run_certify(args: argparse.Namespace) -> None:
    """Certify the tokeniser on the corpus and print the certificate (or the table of budgets)."""
    tokenizer = load_tokenizer(args)
    options = dict(solver=args.solver, time_limit=args.time_limit, max_token_bytes=args.max_token_bytes,
                   memory_limit=args.memory_limit, progress=not args.quiet, **reader_options(args))
    if args.plot is not None and args.budgets is None:
        raise ConfigError("--plot draws the gap against the budget: it needs --budgets")
    if args.base is not None:
        (options["base"],) = load_tokenizers([args.base], args).values()
    if args.budgets is None:
        certificate = certify(tokenizer, args.corpus, **options)
        if args.json:
            print(json.dumps(certificate.to_dict(), indent=2))
        else:
            print(certificate.summary())
        statuses = [certificate.status]
    else:
        if getattr(tokenizer, "merges", None) is None:
            raise ConfigError(f"--budgets certifies the prefixes of a BPE merge list; {args.tokenizer} has no merges")
        rows = certify_table(tokenizer, args.corpus, args.budgets, **options)
        if args.json:
            print(json.dumps([{"certificate": row.certificate.to_dict(), "roundings": row.roundings}
                              for row in rows], indent=2))
        else:
            print(table(rows))
        statuses = [row.certificate.status for row in rows]
        if args.plot is not None:
            with atomic_write(args.plot, "wb") as stream:
                stream.write(plot_gap_vs_budget({row.certificate.budget: row.percentages() for row in rows}))
    if any(stopped_early(status) for status in statuses) and not args.quiet:
        print("the solve was stopped early (time limit or Ctrl-C): every bound above is valid, but weaker",
              file=sys.stderr)


def table(rows) -> str:
    """The paper's Table 2 shape: one line per budget K, the bound and each tokeniser's count as
    % of it."""
    columns: dict[str, dict[str, object]] = {"bound": {}}
    keys = []
    for row in rows:
        key = f"{row.certificate.budget:,}"
        keys.append(key)
        columns["bound"][key] = round(row.certificate.bound)
        for name, value in row.percentages().items():
            columns.setdefault(name, {})[key] = None if value is None else f"{value:.2f}%"
        columns.setdefault("status", {})[key] = row.certificate.status
    return format_table(columns, keys=keys, label="K")


COMMANDS = {
    "certify": Command("Lower-bound the token count any same-size vocabulary can reach.", EXAMPLES,
                       add_certify_arguments, run_certify),
}
