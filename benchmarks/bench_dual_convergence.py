"""How close the dual solver's default schedule gets to a long solve: for each budget K, the
bound of `polytok.lp.dual.dual_ascent` with its defaults against one with 60 steps per stage
then up to 300 more while the bound rises (a reference near the LP's optimum where no LP solve
fits), with their wall and CPU seconds and steps per stage. This is the check of the 0.1% target
on corpora too large for PDLP.

Data: --corpus, a file or a directory of files counted whole with cl100k (with --head N, only a
file's first N bytes, to the end of that document, as `bench_scale.py --certify --head`).

Usage: nice python benchmarks/bench_dual_convergence.py --corpus /work/large-ray/shuffled.txt
           --head 41943040 --budgets 8192,32768 [--modes default,long] [--json out.json]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import polytok  # noqa: E402
from polytok.files import atomic_write  # noqa: E402
from polytok.lp import dual  # noqa: E402
from polytok.lp.bound import lagrangian  # noqa: E402
from polytok.lp.graph import TokenisationGraph  # noqa: E402
from scale_certify import head_of  # noqa: E402

MODES = {"default": {}, "long": {"iterations": 60, "extend": 300}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", required=True, help="a text file, or a directory of them")
    parser.add_argument("--head", type=float, default=None, help="only the first N bytes of a --corpus file")
    parser.add_argument("--budgets", default="8192,32768")
    parser.add_argument("--modes", default="default,long", help=f"of: {', '.join(MODES)}")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    modes = args.modes.split(",")
    if unknown := [mode for mode in modes if mode not in MODES]:
        parser.error(f"--modes: unknown {unknown}; expected some of {sorted(MODES)}")
    if args.head is not None and not os.path.isfile(args.corpus):
        parser.error("--head needs --corpus to name one file")
    budgets = [int(budget) for budget in args.budgets.split(",")]
    with tempfile.TemporaryDirectory() as scratch:
        if os.path.isdir(args.corpus):
            files = sorted(glob.glob(os.path.join(args.corpus, "*")))
        else:
            files = [head_of(args.corpus, int(args.head), scratch) if args.head is not None else args.corpus]
        counts = polytok.count(files, pattern="cl100k", progress=False)
        size = sum(os.path.getsize(path) for path in files)
    graph = TokenisationGraph(counts, None)
    print(f"{size / 1e6:.1f} MB, {len(counts):,} unique pre-tokens, {graph.num_edges:,} edges", flush=True)
    rows = []
    for budget in budgets:
        for mode in modes:
            wall, cpu = time.perf_counter(), time.process_time()
            solution, _, stages = dual.dual_ascent(graph, budget, **MODES[mode])
            bound = lagrangian(graph, solution.duals, budget).bound
            rows.append({"budget": budget, "mode": mode, "bound": bound, "wall": time.perf_counter() - wall,
                         "cpu": time.process_time() - cpu, "steps": [stage["iterations"] for stage in stages]})
            del solution
            reference = next((row["bound"] for row in rows if row["budget"] == budget and row["mode"] == "long"), None)
            versus = "" if reference is None else "  " + ", ".join(
                f"{row['mode']} {100 * (row['bound'] / reference - 1):+.3f}% of long" for row in rows
                if row["budget"] == budget and row["mode"] != "long")
            print(f"K={budget:<6} {mode:<8} bound {bound:,.0f}  {rows[-1]['wall']:.0f} s wall, "
                  f"{rows[-1]['cpu']:.0f} s CPU, {sum(rows[-1]['steps'])} steps{versus}", flush=True)
    if args.json is not None:
        with atomic_write(args.json) as handle:  # never a half-written file
            json.dump({"corpus": args.corpus, "head": args.head, "bytes": size, "unique_pre_tokens": len(counts),
                       "edges": graph.num_edges, "rows": rows}, handle, indent=1)


if __name__ == "__main__":
    main()
