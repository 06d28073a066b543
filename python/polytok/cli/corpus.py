"""`polytok count` (pre-token counts of a corpus, saved for training) and `polytok stats` (the
word statistics of a corpus: Zipf, Heaps, OOV)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import polytok
from polytok import checks
from polytok.cli.options import Command, add_corpus_options, pattern, quiet_ray_errors, reader_options
from polytok.metrics import corpus_stats
from polytok.report import write_corpus_plots
from polytok.tables import format_table

COUNT_EXAMPLES = """examples:
  polytok count corpus.txt -o counts.ptc
  polytok count data/ --pattern o200k --special '<|endoftext|>' -o counts.ptc
  polytok count shard-*.jsonl.zst --text-field content -o counts.ptc
  polytok count /shared/corpus/ --ray auto -o counts.ptc    # on the Ray cluster of this machine"""

STATS_EXAMPLES = """examples:
  polytok stats quijote.txt
  polytok stats corpus/ --json
  polytok stats corpus.txt --plots figures/    # rank-frequency.png and growth.png"""


def add_count_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok count CORPUS... -o counts.ptc`."""
    parser.add_argument("corpus", type=Path, nargs="+", help="text, .jsonl or .parquet files (optionally .gz/.zst), directories or globs")
    parser.add_argument("-o", "--output", required=True, help="counts file to write")
    parser.add_argument("--pattern", default=checks.DEFAULT_PATTERN, help="preset (gpt2, cl100k, o200k, nanochat), a regex, or 'none'")
    parser.add_argument("--special", action="append", default=[], help="special token to split out (repeatable)")
    parser.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores; with --ray: of each task, default 1)")
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="count on a Ray cluster: 'local' (a new one on this machine), 'auto' (the one `ray start` "
        "started here) or its host:port; the files must be readable at the same path on every node",
    )
    add_corpus_options(parser)


def run_count(args: argparse.Namespace) -> None:
    """Count the corpus's pre-tokens and save the counts."""
    if args.ray:
        quiet_ray_errors()
    counts = polytok.count(
        args.corpus,
        pattern=pattern(args.pattern),
        special_tokens=args.special,
        num_threads=args.threads,
        progress=not args.quiet,
        engine="ray" if args.ray else "local",
        address=args.ray,
        **reader_options(args),
    )
    counts.save(args.output)
    if not args.quiet:
        print(f"{len(counts):,} unique pre-tokens, {counts.total:,} in all -> {args.output}", file=sys.stderr)


def add_stats_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok stats CORPUS... [--json] [--plots DIR]`."""
    parser.add_argument("corpus", type=Path, nargs="+", help="corpus files, directories or globs")
    parser.add_argument("--held-out", type=float, default=0.1, help="share of words, at the end, for the OOV rate")
    parser.add_argument("--plots", metavar="DIR", help="write rank-frequency.png and growth.png into DIR")
    parser.add_argument("--json", action="store_true", help="print JSON (curves included)")
    add_corpus_options(parser)


def run_stats(args: argparse.Namespace) -> None:
    """Print the word statistics of a corpus; optionally write its plots."""
    result = corpus_stats(list(args.corpus), held_out=args.held_out, progress=not args.quiet, **reader_options(args))
    if args.plots:
        written = write_corpus_plots(result, args.plots)
        if not args.quiet:
            print("plots: " + ", ".join(str(path) for path in written), file=sys.stderr)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(format_table({"corpus": result}))


COMMANDS = {
    "count": Command("Count the pre-tokens of a corpus into a reusable counts file.", COUNT_EXAMPLES,
                     add_count_arguments, run_count),
    "stats": Command("Corpus statistics: words, Zipf, Heaps, OOV, bytes against characters.", STATS_EXAMPLES,
                     add_stats_arguments, run_stats),
}
