"""The "dual" solver: smoothed Lagrangian dual ascent on the full tokenisation graph.

No LP is built. The Lagrangian bound L(mu) (see bound.py) is maximised directly over the edge
prices mu >= 0 and the budget price lambda, after smoothing its two non-smooth parts: each
pre-token's shortest path becomes a soft minimum over its paths (temperature tau, in tokens)
and the top-K sum an entropic one (temperature tau x an estimate of lambda's scale, lowered for
colours too rare for their price to reach lambda, see `src/lp/dual_ascent.rs`). The Rust
core (`src/lp/dual_ascent.rs`) runs projected L-BFGS on that smooth concave function from
lambda at its estimated scale (`START_PRICE`) and mu = 0, one stage per temperature, from 1
down by halves to about 3 x `tolerance`, each stage run on while the bound still rises by more
than `tolerance` of itself per 10 steps, and keeps the prices with the best *exact* L(mu).
Those prices are what the certificate evaluates, so the bound is valid whatever the smoothing
or an early stop does; only its tightness depends on them.

Compared with an LP solver it needs memory for the graph's edges only (no matrix), and the
smoothed colour values c_t = sigmoid((M_t - lambda) / colour_tau_t) are its primal estimate for
rounding. Stages are counted in iterations, never in seconds (unless `time_limit` is given), so
the result is the same on any machine and at any thread count.
"""
from __future__ import annotations

import time
from typing import Iterator

import numpy as np

from polytok import _core
from polytok.errors import ConfigError
from polytok.lp.graph import TokenisationGraph
from polytok.lp.solvers import Solution
from polytok.progress import progress_bar

FIRST_TEMPERATURE = 1.0
"""Path temperature (tokens) of the first stage: smooth enough that the first L-BFGS steps
move the prices far. Where K is small against the corpus' distinct pre-tokens (K = 256 at 5 MB,
1024 at 40 MB: the ratio of K = 8192 at 1.2 GB), a start at 0.3 leaves the bound 1.7-2.8% below a
long solve's, and a colder start lower still."""
START_PRICE = 1.0
"""A cold ascent starts with the budget price lambda at this many times the price scale (a
quarter of the K-th largest weighted colour frequency), the edge prices at 0: lambda near its
scale from the first step, so the hot stages converge rather than climb. At 1.2 GB and K = 8192
this start ends 0.74% higher than lambda = 0, with Det closer to the bound. 0 starts at 0."""
COOLING = 2.0
"""Each stage's temperature is the previous one's divided by this: stages close enough that each
starts near its optimum (cooling by thirds converges less in as many steps)."""
COLOUR_TAU_RATIO = 1.0
"""Colour temperature per token of path temperature, in units of the estimated price of a token
of budget (a quarter of the K-th largest weighted colour frequency; for a rarer colour, a
quarter of its own frequency; see `src/lp/dual_ascent.rs`)."""


def temperatures(tolerance: float) -> list[float]:
    """The stage temperatures: FIRST_TEMPERATURE divided by COOLING until below 3 x tolerance
    (the last stage's smoothing then costs about that fraction of a token per pre-token)."""
    if not tolerance > 0:
        raise ConfigError(f"tolerance must be > 0, got {tolerance}")
    schedule = [FIRST_TEMPERATURE]
    while schedule[-1] / COOLING >= 3 * tolerance * (1 - 1e-9):
        schedule.append(schedule[-1] / COOLING)
    return schedule


STOPPED_EARLY = ("TIME_LIMIT", "INTERRUPTED")
"""Statuses of an ascent that stopped before its last stage: its prices still certify, only a
weaker bound."""


def whole_pre_token_colours(graph: TokenisationGraph) -> np.ndarray | None:
    """The colour of every pre-token of two or more bytes taken whole (its edge (0, L), the
    last of position 0's edges in the full graph's order); None on a length-capped graph
    where a long pre-token has no such edge."""
    lengths = np.diff(np.asarray(graph.counts.offsets, dtype=np.int64))
    if graph.max_token_bytes is not None and np.any(lengths > graph.max_token_bytes):
        return None
    first_edge = np.concatenate([[0], np.cumsum(lengths * (lengths - 1) // 2)])[:-1]
    long = lengths >= 2
    return graph.core.edge_colours_at(first_edge[long] + lengths[long] - 2).astype(np.int64)


TIE_FRACTION = 0.25
"""Colours that could save fewer tokens than this fraction of the price scale are tied to the
budget price (see `own_price_colours`)."""


def price_scale(graph: TokenisationGraph, budget: int) -> float:
    """The dual solver's estimate of the budget price: a quarter of the K-th largest weighted
    colour frequency, at least 1 (`src/lp/dual_ascent.rs` uses the same)."""
    frequencies = graph.core.colour_frequencies()
    if graph.fixed is not None:  # the budget buys the colours that are not fixed
        frequencies = np.where(graph.fixed, 0, frequencies)
    if budget == 0 or len(frequencies) == 0:
        return 1.0
    split = len(frequencies) - min(budget, len(frequencies))
    return max(float(np.partition(frequencies, split)[split]) / 4.0, 1.0)


def own_price_colours(graph: TokenisationGraph, budget: int, tie_fraction: float) -> np.ndarray | None:
    """The colours whose edges get prices of their own: those whose F_t (len - 1), the most
    tokens they could save, reaches `tie_fraction` x the price scale (None: every colour).

    A colour that saves fewer tokens than the budget price lambda is worth no token of budget,
    and with its edges tied (each priced lambda n_w / F_t) none is ever cheaper than its bytes:
    the bound loses nothing. The price scale overestimates lambda (lambda came out at 0.45-0.55
    of it at 1 and 5 MB), and with the default fraction the tie measured lossless there (within
    0.001% of every colour priced) while it halves the variables at 1.2 GB."""
    if not tie_fraction > 0:
        return None
    # From the core's arrays, not the graph's cached copies: these are freed before the ascent.
    saving = graph.core.colour_frequencies().astype(np.float64)
    saving *= graph.core.colour_lengths() - 1.0
    return saving >= tie_fraction * price_scale(graph, budget)


def dual_ascent(
    graph: TokenisationGraph,
    budget: int,
    *,
    tolerance: float = 1e-4,
    iterations: int = 15,
    memory: int = 5,
    extend: int = 65,
    gain: float | None = None,
    time_limit: float | None = None,
    progress: bool = False,
    tie_fraction: float = TIE_FRACTION,
) -> tuple[Solution, np.ndarray, list[dict]]:
    """Runs the stages; returns a Solution whose `duals` are the full-graph edge prices of the
    best exact bound (and `primal` the colour values at the end), the colour values, and one
    record per stage. Each stage runs `iterations` L-BFGS steps, then up to `extend` more while
    the best exact bound still rose by more than `gain` (default: `tolerance`) of itself over
    the last 10: the effort goes where the ascent converges slowly, e.g. a small K on a large
    corpus. Both count steps, so the result stays deterministic. `time_limit` or Ctrl-C stops
    the ascent (status TIME_LIMIT or INTERRUPTED; the prices found so far still certify). A
    budget that holds every multi-byte pre-token whole needs no stages."""
    return next(dual_ascent_budgets(
        graph, [budget], tolerance=tolerance, iterations=iterations, memory=memory, extend=extend,
        gain=gain, time_limit=time_limit, progress=progress, tie_fraction=tie_fraction,
    ))


def dual_ascent_budgets(
    graph: TokenisationGraph,
    budgets: list[int],
    *,
    tolerance: float = 1e-4,
    iterations: int = 15,
    memory: int = 5,
    extend: int = 65,
    gain: float | None = None,
    time_limit: float | None = None,
    progress: bool = False,
    warm_start: bool = False,
    tie_fraction: float = TIE_FRACTION,
) -> Iterator[tuple[Solution, np.ndarray, list[dict]]]:
    """`dual_ascent` for each budget in turn on one graph, yielded as it finishes. With
    `warm_start`, each budget after the first starts from the previous one's prices and budget
    price and runs the whole schedule; it is off by default because it measured worse: within
    0.01% of a cold start at 60 KB, but 4.8% below it at 16 MB (K = 4096 -> 8192), and
    skipping the hottest stages lost up to 15% even at 60 KB. `time_limit` counts for the whole
    run; once it or Ctrl-C stops the ascent, the remaining budgets run no stage and keep the
    prices reached (their status says so)."""
    budgets = [int(budget) for budget in budgets]
    if any(budget < 0 for budget in budgets):
        raise ConfigError(f"the budget K must be >= 0, got {min(budgets)}")
    if iterations < 1:
        raise ConfigError(f"iterations must be >= 1, got {iterations}")
    if extend < 0:
        raise ConfigError(f"extend must be >= 0 iterations, got {extend}")
    schedule = temperatures(tolerance)
    gain = tolerance if gain is None else gain
    if not gain >= 0:
        raise ConfigError(f"gain must be >= 0, got {gain}")
    if time_limit is not None and time_limit <= 0:
        raise ConfigError(f"time_limit must be > 0 seconds, got {time_limit}")
    start = time.perf_counter()
    whole = whole_pre_token_colours(graph)
    if whole is not None and graph.fixed is not None:
        whole = whole[~graph.fixed[whole]]  # whole pre-tokens that are fixed tokens need no budget
    ascent = None
    stopped = None
    for budget in budgets:
        begun = time.perf_counter()
        if whole is not None and budget >= len(whole):
            # Every multi-byte pre-token fits in the budget as one token: one token per pre-token is
            # optimal, and zero prices certify it (L(0) = sum of the counts).
            colour_values = np.zeros(graph.num_colours)
            colour_values[whole] = 1.0
            solution = Solution(
                primal=colour_values, duals=np.zeros(graph.num_edges), objective=float(graph.counts.counts.sum()),
                status="BUDGET_COVERS_EVERY_PRE_TOKEN", solver="dual", seconds=time.perf_counter() - begun,
                iterations=0, residuals={},
            )
            yield solution, colour_values, []
            continue
        if ascent is not None and warm_start:
            ascent.set_budget(graph.core, budget)
        else:
            ascent = None  # the previous budget's state goes before the next is allocated
            ascent = _core.DualAscent(graph.core, budget, COLOUR_TAU_RATIO, own_price_colours(graph, budget, tie_fraction))
            ascent.start_budget_price(START_PRICE)
        stages: list[dict] = []
        evaluations = ascent.evaluations
        with progress_bar(progress, total=len(schedule), desc=f"ConvexTok dual ascent (K={budget})",
                          unit="stage") as bar:
            try:
                for tau in schedule:
                    left = None if time_limit is None else time_limit - (time.perf_counter() - start)
                    if stopped is not None or (left is not None and left <= 0):
                        break
                    steps, interrupted = ascent.stage(graph.core, tau, iterations, memory=memory, seconds=left,
                                                      extend=extend, gain=gain)
                    stages.append({"round": len(stages), "temperature": tau, "iterations": steps,
                                   "variables": ascent.variables, "evaluations": ascent.evaluations,
                                   "best_lagrangian": ascent.best_value, "budget_price": ascent.budget_price})
                    bar.update()
                    bar.set_postfix(bound=f"{ascent.best_value:.6g}")
                    if interrupted:
                        stopped = "INTERRUPTED"
            except KeyboardInterrupt:
                stopped = "INTERRUPTED"
        if stopped is None and time_limit is not None and time.perf_counter() - start >= time_limit:
            stopped = "TIME_LIMIT"
        colour_values = np.clip(ascent.colour_values(graph.core), 0.0, 1.0)
        solution = Solution(
            primal=colour_values, duals=ascent.best_prices(graph.core), objective=float(ascent.best_value),
            status=stopped or "STAGES_DONE", solver="dual", seconds=time.perf_counter() - begun,
            iterations=int(ascent.evaluations - evaluations),
            residuals={"temperature": stages[-1]["temperature"] if stages else schedule[0]},
        )
        if not warm_start:
            ascent = None  # its state goes before the caller certifies with these prices
        yield solution, colour_values, stages
        # The next budget's ascent should not hold on to this one's prices.
        del solution, colour_values
