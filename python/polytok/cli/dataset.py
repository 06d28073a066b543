"""`polytok encode-dataset`: encode jsonl, parquet or text files into token shards on a Ray
cluster, with an index; a rerun resumes where a failed one stopped."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from polytok.cli.options import Command, add_corpus_options, add_tokenizer_option, quiet_ray_errors, reader_options
from polytok.cli.options import pattern as pattern_option
from polytok.datasets import encode_dataset

EXAMPLES = """examples:
  polytok encode-dataset data/*.jsonl -t tok.json -o tokens/ --append '<|endoftext|>'
  polytok encode-dataset /shared/web/ -t tok.json -o /shared/tokens/ --ray auto --prepend '<|bos|>'
  polytok encode-dataset shards/ -t cl100k_base.tiktoken --pattern cl100k -o tokens/"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok encode-dataset INPUT... -t FILE -o DIR`."""
    parser.add_argument("inputs", type=Path, nargs="+", help="jsonl, parquet or text files (optionally .gz/.zst), directories or globs; one shard each")
    add_tokenizer_option(parser)
    parser.add_argument("-o", "--output", required=True, help="directory for shard-NNNNN.bin, their records and index.json (made with its parents if missing)")
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        default="local",
        help="the Ray cluster: 'local' (a new one on this machine, the default), 'auto' (the one "
        "`ray start` started here) or its host:port; inputs and output must be at the same path on every node",
    )
    parser.add_argument("--prepend", metavar="TOKEN", help="special token before every document (e.g. a BOS token)")
    parser.add_argument("--append", metavar="TOKEN", help="special token after every document (e.g. <|endoftext|>)")
    parser.add_argument("--retries", type=int, default=3, help="times a task whose worker died is run again")
    add_corpus_options(parser)


def run(args: argparse.Namespace) -> None:
    """Encode the inputs into token shards and write the index."""
    quiet_ray_errors()
    index = encode_dataset(
        args.inputs,
        args.tokenizer,
        args.output,
        address=args.ray,
        prepend=args.prepend,
        append=args.append,
        pattern=pattern_option(args.pattern),
        special_tokens=args.special,
        retries=args.retries,
        progress=not args.quiet,
        **reader_options(args),
    )
    if not args.quiet:
        print(
            f"{len(index['shards'])} shards ({index['encoded']} encoded, {index['skipped']} already done), "
            f"{index['documents']:,} documents, {index['tokens']:,} tokens -> {args.output}",
            file=sys.stderr,
        )


COMMANDS = {
    "encode-dataset": Command("Encode jsonl/parquet/text files into token shards (.bin) on a Ray cluster, resumably.",
                              EXAMPLES, add_arguments, run),
}
