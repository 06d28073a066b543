"""What a command is to the parser, and the options several commands share: the corpus reader's,
the tokeniser file's, and the output format's."""
from __future__ import annotations

import argparse
import os
from typing import Any, Callable, NamedTuple

from polytok.compare import load_tokenizers as load_files
from polytok.checks import ERROR_MODES


class Command(NamedTuple):
    """One `polytok` command: its one-line help, the examples its --help ends with, the function
    that adds its arguments to its parser and the function that runs it on the parsed arguments."""

    help: str
    examples: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]


def add_corpus_options(parser: argparse.ArgumentParser) -> None:
    """The corpus reader's options (JSON field, parquet column, invalid UTF-8 policy)."""
    parser.add_argument("--text-field", default="text", help="JSON field holding the text in .jsonl files")
    parser.add_argument("--text-column", default="text", help="column holding the text in .parquet files")
    parser.add_argument(
        "--errors",
        choices=ERROR_MODES,
        default="strict",
        help="invalid UTF-8 in a text file: stop with an error naming the byte offset, replace it "
        "with U+FFFD, or read the documents as raw bytes",
    )


def reader_options(args: argparse.Namespace) -> dict[str, Any]:
    """The corpus reader's options from parsed arguments."""
    return {"text_field": args.text_field, "text_column": args.text_column, "errors": args.errors}


def add_tokenizer_format_options(parser: argparse.ArgumentParser) -> None:
    """Options for tokeniser files that lack a pattern or special tokens (tiktoken)."""
    parser.add_argument("--pattern", help="pre-tokenisation preset or regex, for formats that lack one (tiktoken)")
    parser.add_argument("--special", action="append", default=[], help="special token, for formats that lack them")


def add_tokenizer_option(parser: argparse.ArgumentParser) -> None:
    """-t FILE: the one tokeniser a command applies, with the options its format may need."""
    parser.add_argument("-t", "--tokenizer", required=True, help="tokeniser file (polytok JSON, .tiktoken, ...)")
    add_tokenizer_format_options(parser)


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """--json / --csv instead of a text table."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print JSON")
    group.add_argument("--csv", action="store_true", help="print CSV")


def quiet_ray_errors() -> None:
    """Ray logs every failed task result nobody fetched once more; when one task fails, polytok
    cancels the others and reports the first failure as its one-line error, so those are noise."""
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")


def integer_list(value: str, malformed: str, empty: str) -> list[int]:
    """'4352,8448' -> [4352, 8448]; argparse's error `malformed` (with the value appended) when a
    part is not an integer, `empty` when there is none."""
    try:
        numbers = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{malformed}, got {value!r}") from None
    if not numbers:
        raise argparse.ArgumentTypeError(empty)
    return numbers


def pattern(value: str | None) -> str | None:
    """A --pattern value as the library takes it: 'none' (any case) means no pre-tokenisation."""
    return None if value is not None and value.lower() == "none" else value


def load_tokenizers(paths: list[str], args: argparse.Namespace) -> dict[str, Any]:
    """The tokenisers of `paths` by name (`compare.load_tokenizers`), with --pattern and
    --special for formats that lack them: every command builds its tokenisers here."""
    options: dict[str, Any] = {}
    if args.pattern is not None:
        options["pattern"] = pattern(args.pattern)
    if args.special:
        options["special_tokens"] = args.special
    return load_files(paths, **options)


def load_tokenizer(args: argparse.Namespace) -> Any:
    """The one tokeniser of -t (`load_tokenizers`)."""
    (tokenizer,) = load_tokenizers([args.tokenizer], args).values()
    return tokenizer
