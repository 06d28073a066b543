"""`polytok export`: write a tokeniser file in another library's format (SentencePiece .model,
HF tokenizer.json, tiktoken ranks), atomically; a tokeniser the format cannot hold exactly is
an error that says why, and nothing is written."""
from __future__ import annotations

import argparse

import polytok.formats
from polytok.cli.options import Command, add_tokenizer_option, load_tokenizer

EXAMPLES = """examples:
  polytok export -t unigram.json --format sentencepiece -o unigram.model
  polytok export -t tok.json --format huggingface -o tokenizer.json
  polytok export -t tok.json --format tiktoken -o tok.tiktoken"""


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok export -t FILE --format FORMAT -o FILE`."""
    add_tokenizer_option(parser)
    parser.add_argument("--format", required=True, choices=["sentencepiece", "huggingface", "tiktoken"], help="file format to write")
    parser.add_argument("-o", "--output", required=True, help="file to write")


def run_export(args: argparse.Namespace) -> None:
    """Load the tokeniser of -t and write it as --format to -o."""
    tokenizer = load_tokenizer(args)
    polytok.formats.save(tokenizer, args.output, format=args.format)


COMMANDS = {
    "export": Command("Write a tokeniser as a SentencePiece model, HF tokenizer.json or tiktoken file.", EXAMPLES,
                      add_export_arguments, run_export),
}
