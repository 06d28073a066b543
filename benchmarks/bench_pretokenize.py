"""Single-thread pre-tokenisation speed: polytok's preset matchers against the same patterns in
fancy-regex (the engine tiktoken splits with), tiktoken itself and Python's `regex.findall`.

tiktoken's split cannot be called on its own, so it runs as an Encoding whose ranks are only the
256 single bytes: no merge ever applies, and encode_ordinary's time is the regex split plus one
id per byte (an upper bound of its split time). All engines run in this process on the same
text (a mix of /work/shared/data), one thread each; the table shows the median wall time.

    python benchmarks/bench_pretokenize.py [--repeats 3] [--megabytes 0 (all)]
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import regex
import tiktoken

from polytok import _core
from polytok.pretokenize import PRESETS, PreTokenizer

DATA = Path("/work/shared/data")


def median_seconds(run: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--megabytes", type=float, default=0, help="cut the mix to this size (0: all)")
    arguments = parser.parse_args()

    data = b"".join(path.read_bytes() for path in sorted(DATA.glob("*.txt")))
    if arguments.megabytes:
        data = data[: int(arguments.megabytes * 1e6)].decode("utf-8", "ignore").encode()
    text = data.decode("utf-8")
    megabytes = len(data) / 1e6
    print(f"text: {megabytes:.1f} MB from {DATA} ({len(list(DATA.glob('*.txt')))} files), "
          f"median of {arguments.repeats}, one thread\n")
    header = f"{'preset':9} {'engine':34} {'MB/s':>8} {'seconds':>8} {'faster by':>11}"
    print(header)
    print("-" * len(header))
    byte_ranks = {bytes([byte]): byte for byte in range(256)}
    for name, pattern in PRESETS.items():
        polytok = PreTokenizer(name)
        assert polytok.preset == name
        generic = _core.PreTokenizer(pattern, [], True)
        encoding = tiktoken.Encoding(f"bytes-{name}", pat_str=pattern, mergeable_ranks=byte_ranks,
                                     special_tokens={})
        compiled = regex.compile(pattern)
        # The same pieces from every engine, file by file, before anything is timed: the
        # presets' split equals `regex.findall` on every file of the data.
        for path in sorted(DATA.glob("*.txt")):
            document = path.read_text(encoding="utf-8")
            expected = [piece.encode() for piece in compiled.findall(document)]
            assert polytok.split(document) == expected, f"{name} differs from regex.findall on {path.name}"
        count = len(polytok.piece_lengths(data))
        assert count == len(generic.piece_lengths(data))
        engines = {
            "polytok preset matcher": lambda: polytok.piece_lengths(data),
            "polytok split() -> list[bytes]": lambda: polytok.split(data),
            "fancy-regex (tiktoken's engine)": lambda: generic.piece_lengths(data),
            "tiktoken encode, byte-only ranks": lambda: encoding.encode_ordinary(text),
            "regex.findall": lambda: compiled.findall(text),
        }
        seconds = {engine: median_seconds(run, arguments.repeats) for engine, run in engines.items()}
        ours = seconds["polytok preset matcher"]
        for engine, elapsed in seconds.items():
            ratio = "" if engine == "polytok preset matcher" else f"{elapsed / ours:9.1f}x"
            print(f"{name:9} {engine:34} {megabytes / elapsed:8.1f} {elapsed:8.3f} {ratio:>11}")
        print(f"{'':9} ({count} pre-tokens)")


if __name__ == "__main__":
    main()
