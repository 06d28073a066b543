"""The `polytok` command line: one module per group of commands, each naming its commands with
their arguments and the function that runs them; this module wires them into one parser.

Every command reports bad input as one line on stderr and exits non-zero; output files are
written to a temporary file and renamed, so a failed run never leaves half a file behind.
"""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

import polytok
from polytok.cli import apply, certify, corpus, dataset, evaluate, export, lm, train
from polytok.cli.options import Command
from polytok.errors import Error

#: Every command by name, in the order `polytok --help` lists them.
COMMANDS: dict[str, Command] = {
    **corpus.COMMANDS,
    **train.COMMANDS,
    **apply.COMMANDS,
    **dataset.COMMANDS,
    **export.COMMANDS,
    **certify.COMMANDS,
    **evaluate.COMMANDS,
    **lm.COMMANDS,
}


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
    for name, command in COMMANDS.items():
        command_parser = subparsers.add_parser(
            name,
            help=command.help,
            description=command.help,
            epilog=command.examples,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        # Accepted after the command too (`polytok train -q ...`); SUPPRESS keeps the global value.
        command_parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="no progress bars")
        command.add_arguments(command_parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `polytok` script; returns the process exit status."""
    args = build_parser().parse_args(argv)
    try:
        COMMANDS[args.command].run(args)
    except Error as error:
        print(f"polytok {args.command}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    return 0
