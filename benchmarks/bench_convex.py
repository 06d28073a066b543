"""ConvexTok at scale: LP size, solve time and peak memory per solver, the certified bound, and
BPE / Det / Bias / Int / Price token counts as % of the bound (the shape of the paper's Table 2).

Data: 100 KB, 1 MB and 5 MB samples of a round-robin mix of English and Spanish handbook
paragraphs (../shared/data) and Python standard library modules, pre-tokenised with cl100k.
BPE is Hugging Face `tokenizers`' trainer on the same pre-tokens (byte level, no regex inside a
pre-token), scored by its own encoder.

Each (sample, K, solver) runs in a fresh subprocess so that its peak memory is its own.
Solvers: the LP backends (pdlp, highs, ...) with column generation, or "dual" (no LP: smoothed
dual ascent on the full graph; its "LP vars" are its variables, the free edge prices and
lambda, and "rnds" its temperature stages).
Usage: nice python benchmarks/bench_convex.py [--sizes 1e5,1e6,5e6] [--budgets 1024,4096,8192]
       [--solvers pdlp,dual,highs] [--json out.json]
"""
from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import resource
import subprocess
import sys
import time

DATA = "/work/shared/data"
PYTHON_STDLIB = "/root/.pyenv/versions/3.11.7/lib/python3.11/*.py"


def sample_documents(size: int) -> list[str]:
    """Round-robin English paragraph, Spanish paragraph, Python module until `size` bytes."""
    with open(f"{DATA}/handbook-en-US.txt", encoding="utf-8") as handle:
        english = [p + "\n\n" for p in handle.read().split("\n\n")]
    with open(f"{DATA}/handbook-es-ES.txt", encoding="utf-8") as handle:
        spanish = [p + "\n\n" for p in handle.read().split("\n\n")]
    python = []
    for path in sorted(glob.glob(PYTHON_STDLIB)):
        with open(path, encoding="utf-8", errors="replace") as handle:
            python.append(handle.read())
    sources, positions, documents, total = [english, spanish, python], [0, 0, 0], [], 0
    turn = 0
    while total < size and any(p < len(s) for p, s in zip(positions, sources)):
        source = turn % 3
        turn += 1
        if positions[source] >= len(sources[source]):
            continue
        document = sources[source][positions[source]]
        positions[source] += 1
        encoded = document.encode("utf-8")
        if total + len(encoded) > size:
            document = encoded[: size - total].decode("utf-8", "ignore")
        documents.append(document)
        total += len(document.encode("utf-8"))
    return documents


def word_counts(size: int):
    from polytok.counts import PreTokenCounts
    from polytok.pretokenize import PreTokenizer

    splitter = PreTokenizer("cl100k")
    counter: collections.Counter[bytes] = collections.Counter()
    for document in sample_documents(size):
        counter.update(splitter.split(document))
    return PreTokenCounts.from_dict(counter, "cl100k")


def bpe_tokens(counts, budget: int) -> tuple[int, float]:
    """HF tokenizers' byte-level BPE trained on the counted pre-tokens: (tokens, seconds)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    start = time.perf_counter()
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=256 + budget, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False, min_frequency=1,
    )
    pieces = [(w.decode("utf-8", "replace"), c) for w, c in counts]

    def stream():
        for piece, count in pieces:
            for _ in range(count):
                yield piece

    tokenizer.train_from_iterator(stream(), trainer, length=int(counts.counts.sum()))
    encodings = tokenizer.encode_batch([piece for piece, _ in pieces])
    tokens = sum(len(e.ids) * count for e, (_, count) in zip(encodings, pieces))
    return tokens, time.perf_counter() - start


def run_one(size: int, budget: int, solver: str, rounds: int, initial: int | None, time_limit: float | None,
            steps: int) -> dict:
    """One configuration, in this (child) process."""
    from polytok.trainers.convex import fit_convex

    counts = word_counts(size)
    wall, cpu = time.perf_counter(), time.process_time()
    fit = fit_convex(
        counts, budget, roundings=("det", "bias", "int", "price"), solver=solver,
        initial_colours=initial, rounds=rounds, time_limit=time_limit, threads=2, subgradient_steps=steps,
    )
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    # The dual solver runs no stage when the budget holds every pre-token: no variables.
    first = fit.relaxation.rounds[0] if fit.relaxation.rounds else {"variables": 0}
    last = fit.relaxation.rounds[-1] if fit.relaxation.rounds else {"variables": 0}
    result = {
        "size": size, "budget": budget, "solver": solver, "unique_pre_tokens": len(counts),
        "pre_tokens": int(counts.counts.sum()), "full_graph_edges": fit.relaxation.graph.num_edges,
        "full_graph_colours": fit.relaxation.graph.num_colours,
        # The dual solver builds no LP: its variables are the free edge prices and lambda.
        "lp_variables": last["variables"], "lp_constraints": last.get("constraints"),
        "lp_nonzeros": last.get("nonzeros"), "first_lp_variables": first["variables"],
        "rounds": len(fit.relaxation.rounds), "status": fit.relaxation.solution.status, "bound": fit.bound,
        "bound_history": fit.bound_history, "tokens": fit.tokens, "wall_seconds": wall, "cpu_seconds": cpu,
        "phase_seconds": fit.seconds,
        "solve_seconds": [fit.seconds["solve"]] if solver == "dual" else [r["seconds"] for r in fit.relaxation.rounds],
        "evaluations": fit.relaxation.solution.iterations,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    return result


def child(args) -> None:
    result = run_one(args.size, args.budget, args.solver, args.rounds, args.initial, args.time_limit, args.steps)
    if args.bpe:
        result["tokens"]["bpe"], result["bpe_seconds"] = bpe_tokens(word_counts(args.size), args.budget)
    print("RESULT " + json.dumps(result))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1e5,1e6,5e6")
    parser.add_argument("--budgets", default="1024,4096,8192")
    parser.add_argument("--solvers", default="pdlp")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of column generation")
    parser.add_argument("--initial-per-budget", type=float, default=None,
                        help="first LP holds this many x K colours of largest potential saving (0: all; "
                             "default: polytok.lp.relax.default_initial_colours)")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds per LP solve")
    parser.add_argument("--steps", type=int, default=30, help="subgradient steps on the full graph")
    parser.add_argument("--json", default=None)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int)
    parser.add_argument("--budget", type=int)
    parser.add_argument("--solver")
    parser.add_argument("--initial", type=int, default=None)
    parser.add_argument("--bpe", action="store_true")
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    from polytok.lp.relax import default_initial_colours
    results = []
    header = (f"{'sample':>7} {'K':>5} {'solver':>6} {'uniq':>6} {'LP vars':>8} {'nnz':>8} {'rnds':>4} "
              f"{'wall s':>7} {'cpu s':>7} {'MB':>6} {'bound':>10} {'BPE%':>7} {'Det%':>7} {'Bias%':>7} "
              f"{'Int%':>7} {'Price%':>7}")
    print(header, flush=True)
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        for budget in [int(k) for k in args.budgets.split(",")]:
            for index, solver in enumerate(args.solvers.split(",")):
                if args.initial_per_budget is None:
                    initial = default_initial_colours(budget)
                else:
                    initial = int(args.initial_per_budget * budget) if args.initial_per_budget > 0 else None
                command = [sys.executable, __file__, "--child", "--size", str(size), "--budget", str(budget),
                           "--solver", solver, "--rounds", str(args.rounds), "--steps", str(args.steps)]
                if initial is not None:
                    command += ["--initial", str(initial)]
                if args.time_limit is not None:
                    command += ["--time-limit", str(args.time_limit)]
                if index == 0:
                    command.append("--bpe")
                done = subprocess.run(command, capture_output=True, text=True, env=os.environ)
                lines = [l for l in done.stdout.splitlines() if l.startswith("RESULT ")]
                if done.returncode != 0 or not lines:
                    print(f"{size:>7} {budget:>5} {solver:>6} failed: {done.stderr.strip()[-400:]}", flush=True)
                    continue
                result = json.loads(lines[-1][len("RESULT "):])
                results.append(result)
                tokens, bound = result["tokens"], result["bound"]

                def percent(name):
                    return f"{100 * tokens[name] / bound:7.2f}" if name in tokens else f"{'-':>7}"

                print(f"{size:>7} {budget:>5} {solver:>6} {result['unique_pre_tokens']:>6} "
                      f"{result['lp_variables']:>8} {result['lp_nonzeros'] or '-':>8} {result['rounds']:>4} "
                      f"{result['wall_seconds']:7.1f} {result['cpu_seconds']:7.1f} {result['peak_rss_mb']:6.0f} "
                      f"{bound:10.1f} {percent('bpe')} {percent('det')} {percent('bias')} {percent('int')} "
                      f"{percent('price')}", flush=True)
    if args.json:
        with open(args.json + ".tmp", "w") as handle:
            json.dump(results, handle, indent=1)
        os.replace(args.json + ".tmp", args.json)


if __name__ == "__main__":
    main()
