"""`polytok lm-eval`: train a small GPT per tokeniser on the same text and compare their validation
bits per byte (polytok.lm.evaluate; needs the `lm` extra, PyTorch)."""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from polytok.cli.options import Command, add_corpus_options, add_tokenizer_format_options, load_tokenizers, reader_options
from polytok.tables import format_table

EXAMPLES = """examples:
  polytok lm-eval -t bpe.json -t det.json --train train.txt --valid valid.txt --budget 4M -o lm.json
  polytok lm-eval -t bpe-4k.json -t det-4k.json --train train/ --valid valid.txt \\
      --budget 2G --depth 12 --context-bytes 4096 --batch-size 32 --seeds 0 1 2 --device cuda -o lm.json
  polytok report bpe.json det.json --text en.txt --lm lm.json -o report.html   # BpB-vs-vocabulary plot"""

SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)
SIZE_UNITS = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}

TABLE_FIELDS = ("family", "vocab_size", "valid_bpb", "valid_bpb_stderr", "seeds", "uniform_bpb",
                "valid_tokens_per_byte", "parameters", "train_bytes", "train_flops", "train_seconds")


def byte_count(text: str) -> int:
    """A number of bytes as written on the command line: 4000000, 4e6, 4M, 500k, 2G (powers of 10)."""
    match = SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of bytes (e.g. 4000000, 4M, 500k)")
    return int(float(match.group(1)) * SIZE_UNITS[match.group(2).lower()])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok lm-eval -t TOK [-t TOK ...] --train PATH... --valid PATH... --budget BYTES`."""
    parser.add_argument("-t", "--tokenizer", action="append", required=True,
                        help="tokeniser file (polytok JSON, .tiktoken, HF tokenizer.json, SentencePiece .model); repeatable")
    parser.add_argument("--train", type=Path, nargs="+", required=True, metavar="PATH",
                        help="training corpus: text, .jsonl or .parquet files, directories or globs")
    parser.add_argument("--valid", type=Path, nargs="+", required=True, metavar="PATH",
                        help="validation corpus, held out from the training corpus")
    parser.add_argument("--budget", type=byte_count, required=True,
                        help="training bytes per model, the same for every tokeniser (e.g. 4M)")
    parser.add_argument("--depth", type=int, default=2, help="transformer layers (default 2)")
    parser.add_argument("--width", type=int, help="model width (default 64 × depth)")
    parser.add_argument("--heads", type=int, help="attention heads (default width / 64)")
    parser.add_argument("--context-bytes", type=int, default=512, help="bytes of text per sequence (default 512)")
    parser.add_argument("--batch-size", type=int, default=16, help="sequences per step (default 16)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], metavar="SEED",
                        help="seeds; one model per tokeniser and seed (default: 0)")
    parser.add_argument("--lr", type=float, default=3e-3, help="peak AdamW learning rate (default 3e-3)")
    parser.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of the matrices")
    parser.add_argument("--warmup", type=float, default=0.05, help="fraction of the steps of linear warm-up")
    parser.add_argument("--device", default="auto", help="auto (a GPU when torch sees one), cpu, cuda or cuda:N")
    parser.add_argument("--log-every", type=int, help="steps per point of the loss curves (default: 50 points)")
    parser.add_argument("-o", "--output", type=Path,
                        help="results JSON, rewritten after every tokeniser (a CSV summary goes beside it)")
    parser.add_argument("--threads", type=int, default=None, help="encoder threads (default: all cores)")
    parser.add_argument("--torch-threads", type=int, default=None,
                        help="torch's CPU threads (default: torch's; 1 is fastest for small models on a busy machine)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print the results as JSON")
    group.add_argument("--csv", action="store_true", help="print the summary as CSV")
    add_tokenizer_format_options(parser)
    add_corpus_options(parser)


def run(args: argparse.Namespace) -> None:
    """Train, evaluate and print the table; on Ctrl-C, say which results were kept."""
    from polytok.lm import CSV_FIELDS, evaluate, summary_rows
    from polytok.tables import to_csv

    tokenizers = load_tokenizers(args.tokenizer, args)
    written_before = _modified(args.output)
    try:
        report = evaluate(
            tokenizers, list(args.train), list(args.valid),
            budget=args.budget, depth=args.depth, width=args.width, heads=args.heads,
            context_bytes=args.context_bytes, batch_size=args.batch_size, seeds=args.seeds,
            learning_rate=args.lr, weight_decay=args.weight_decay, warmup=args.warmup, device=args.device,
            log_every=args.log_every, output=args.output, num_threads=args.threads, torch_threads=args.torch_threads,
            progress=not args.quiet,
            **reader_options(args),
        )
    except KeyboardInterrupt:
        if args.output is not None:
            kept = _modified(args.output) not in (None, written_before)
            print(f"interrupted: {args.output} holds the tokenisers that finished" if kept
                  else "interrupted before any tokeniser finished: nothing written", file=sys.stderr)
        raise
    if args.json:
        print(json.dumps(report, indent=2))
    elif args.csv:
        sys.stdout.write(to_csv(summary_rows(report), CSV_FIELDS))
    else:
        print(format_table(report["results"], TABLE_FIELDS, label="tokenizer"))
    if args.output is not None and not args.quiet:
        print(f"wrote {args.output} and {args.output.with_suffix('.csv')}", file=sys.stderr)


def _modified(path: Path | None) -> int | None:
    """When `path` was last written (ns), None if it does not exist."""
    try:
        return None if path is None else path.stat().st_mtime_ns
    except FileNotFoundError:
        return None


COMMANDS = {
    "lm-eval": Command("Train a small GPT per tokeniser; compare validation bits per byte.", EXAMPLES,
                       add_arguments, run),
}
