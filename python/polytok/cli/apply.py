"""`polytok encode`, `decode` and `info`: apply a tokeniser file to text, ids back to text, and
describe the file. Input is read line by line from files or stdin; one output line per input line."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Iterator, Sequence

from polytok.apply.chunking import check_max_tokens
from polytok.cli.options import Command, add_tokenizer_option, load_tokenizer
from polytok.errors import CorpusError, DecodeError

ENCODE_EXAMPLES = """examples:
  echo 'Hello world' | polytok encode -t tok.json
  polytok encode -t tok.json --output tokens notes.txt
  polytok encode -t tok.json --output count --allow-special all < prompts.txt
  polytok encode -t tok.json --offsets chars notes.txt
  polytok encode -t tok.json --max-tokens 512 long-lines.txt"""

DECODE_EXAMPLES = """examples:
  echo '9906 1917' | polytok decode -t tok.json
  polytok encode -t tok.json a.txt | polytok decode -t tok.json"""

INFO_EXAMPLES = """examples:
  polytok info -t tok.json
  polytok info -t tok.json --json"""


def input_lines(files: Sequence[str]) -> Iterator[bytes]:
    """Lines of the named files, or of stdin, as bytes without their line ends."""
    if not files:
        for line in sys.stdin.buffer:
            yield line.rstrip(b"\n")
        return
    for name in files:
        try:
            stream = open(name, "rb")
        except OSError as error:
            raise CorpusError(f"cannot read {name}: {error.strerror}") from None
        with stream:
            for line in stream:
                yield line.rstrip(b"\n")


def add_encode_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok encode -t FILE [FILE...]`."""
    add_tokenizer_option(parser)
    parser.add_argument("files", nargs="*", help="text files; none: standard input")
    parser.add_argument(
        "--output",
        choices=["ids", "tokens", "count"],
        default="ids",
        help="space-separated ids, token strings (JSON-escaped), or the number of tokens",
    )
    parser.add_argument(
        "--allow-special",
        action="append",
        default=[],
        help="special token allowed in the input ('all' for every one); others are an error",
    )
    parser.add_argument("--ordinary", action="store_true", help="treat special-token text as ordinary text")
    parser.add_argument(
        "--offsets",
        nargs="?",
        const="bytes",
        choices=["bytes", "chars"],
        help="print one JSON object per line with each token's (start, end) in the line, in its UTF-8 "
        "bytes (default) or characters",
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        metavar="N",
        help="keep at most N tokens of each line, never splitting a character",
    )


def run_encode(args: argparse.Namespace) -> None:
    """Encode each input line (UTF-8, undecodable bytes kept as surrogates) and print the result."""
    tokenizer = load_tokenizer(args)
    allowed = "all" if "all" in args.allow_special else set(args.allow_special)
    special = {"allowed_special": frozenset(), "disallowed_special": ()} if args.ordinary else {"allowed_special": allowed}
    if args.max_tokens is not None:
        check_max_tokens(args.max_tokens, "--max-tokens")
    out = sys.stdout
    for line in input_lines(args.files):
        text = line.decode("utf-8", "surrogateescape")
        offsets = None
        if args.offsets:
            ids, offsets = tokenizer.encode_with_offsets(text, unit=args.offsets, **special)
        elif args.max_tokens is not None:
            ids = tokenizer.encode_truncated(text, args.max_tokens, **special)
        elif args.ordinary:
            ids = tokenizer.encode_ordinary(text)
        else:
            ids = tokenizer.encode(text, allowed_special=allowed)
        if offsets is not None and args.max_tokens is not None:
            ids = tokenizer.encode_truncated(text, args.max_tokens, **special)
            offsets = offsets[: len(ids)]
        if args.output == "count":
            result: object = len(ids)
        elif args.output == "ids":
            result = ids
        else:
            result = [tokenizer.token_bytes(i).decode("utf-8", "backslashreplace") for i in ids]
        if offsets is not None:
            out.write(json.dumps({args.output: result, "offsets": offsets.tolist()}, ensure_ascii=False) + "\n")
        elif args.output == "ids":
            out.write(" ".join(map(str, ids)) + "\n")
        else:
            out.write(json.dumps(result, ensure_ascii=False) + "\n")


def add_decode_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok decode -t FILE [FILE...]`."""
    add_tokenizer_option(parser)
    parser.add_argument("files", nargs="*", help="files of ids; none: standard input")


def run_decode(args: argparse.Namespace) -> None:
    """Decode each line of ids and write its bytes."""
    tokenizer = load_tokenizer(args)
    out = sys.stdout.buffer
    for number, line in enumerate(input_lines(args.files), start=1):
        try:
            ids = [int(field) for field in line.split()]
        except ValueError:
            raise DecodeError(f"line {number}: expected space-separated integer ids, got {line[:40]!r}") from None
        out.write(tokenizer.decode_bytes(ids) + b"\n")


def add_info_arguments(parser: argparse.ArgumentParser) -> None:
    """`polytok info -t FILE [--json]`."""
    add_tokenizer_option(parser)
    parser.add_argument("--json", action="store_true", help="print JSON")


def run_info(args: argparse.Namespace) -> None:
    """Print what the tokeniser's `info()` says, as aligned lines or JSON."""
    tokenizer = load_tokenizer(args)
    description = tokenizer.info()
    if args.json:
        print(json.dumps(description, indent=2, ensure_ascii=False))
        return
    for key, value in description.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items()) or "-"
        print(f"{key:>22}: {value}")


COMMANDS = {
    "encode": Command("Encode text, one output line per input line (stdin when no file).", ENCODE_EXAMPLES,
                      add_encode_arguments, run_encode),
    "decode": Command("Decode lines of space-separated ids back into text.", DECODE_EXAMPLES,
                      add_decode_arguments, run_decode),
    "info": Command("Describe a tokeniser file.", INFO_EXAMPLES, add_info_arguments, run_info),
}
