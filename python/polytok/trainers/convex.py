"""ConvexTok training (paper, section 3.3): solve the LP relaxation, round its colour values to a
vocabulary (`polytok.lp.rounding`: det, bias, int, price), and certify the result against a
lower bound on the full tokenisation graph. The tokeniser segments with `shortest_path` (fewest
tokens), the segmentation the LP models.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Iterator

import numpy as np

from polytok.certify import Certificate, stopped_early
from polytok.counts import PreTokenCounts
from polytok.lp import memory
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import Relaxation, check_relax_options, default_initial_colours, relax_budgets
from polytok.lp.rounding import ROUNDINGS, check_rounding, round_colours
from polytok.tokenizer import Tokenizer

# ROUNDINGS is re-exported: the rounding names belong to ConvexTok training too.
__all__ = ["ROUNDINGS", "ConvexFit", "check_options", "fit_convex", "fit_convex_budgets", "train_convex"]

@dataclass
class ConvexFit:
    """Everything one ConvexTok solve produces: the relaxation, the certified bound and, per
    rounding, the chosen tokens with their shortest-path token count on the training counts."""
    relaxation: Relaxation = field(repr=False)
    bound: float
    budget: int
    covers: str
    vocabularies: dict[str, list[bytes]] = field(repr=False)
    tokens: dict[str, int]
    bound_history: list[float]
    seconds: dict[str, float]


def fit_convex(
    counts: PreTokenCounts,
    budget: int,
    *,
    roundings: tuple[str, ...] = ("det",),
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    initial_colours: int | str | None = None,
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    subgradient_steps: int = 30,
    threads: int | None = None,
    progress: bool = False,
    memory_limit: int | str | None = None,
) -> ConvexFit:
    """Solves, rounds (every rounding in `roundings`) and certifies. The bound covers every
    vocabulary of `budget` tokens (no length cap): with an LP solver `max_token_bytes` restricts
    the LP on the full graph, with the dual solver it caps the graph the ascent runs on and the
    certificate prices the longer substrings on the fly. The
    run's peak memory is checked first (`polytok.lp.memory`; `memory_limit` in bytes or e.g.
    "12G", default the memory available)."""
    return next(fit_convex_budgets(
        counts, [budget], roundings=roundings, solver=solver, max_token_bytes=max_token_bytes,
        min_frequency=min_frequency, initial_colours=initial_colours, rounds=rounds, time_limit=time_limit,
        tolerance=tolerance, subgradient_steps=subgradient_steps, threads=threads, progress=progress,
        memory_limit=memory_limit,
    ))


def fit_convex_budgets(
    counts: PreTokenCounts,
    budgets: list[int],
    *,
    roundings: tuple[str, ...] = ("det",),
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    initial_colours: int | str | None = None,
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    subgradient_steps: int = 30,
    threads: int | None = None,
    progress: bool = False,
    memory_limit: int | str | None = None,
) -> Iterator[ConvexFit]:
    """`fit_convex` for each budget in turn on one graph, yielded as each finishes; each
    budget is solved afresh (`polytok.lp.relax.relax_budgets`). A solve stopped by `time_limit` or Ctrl-C is rounded
    and certified without subgradient steps (its status says it stopped)."""
    for rounding in roundings:
        check_rounding(rounding)
    limit = memory.parse_size(memory_limit)
    # The dual solver runs on the graph capped at max_token_bytes (its certificate prices the
    # longer substrings on the fly); the LP solvers restrict their LP on the full graph.
    graph_cap = max_token_bytes if solver == "dual" else None
    memory.guard(counts, solver, graph_cap, "ConvexTok training", limit, cap_option=solver == "dual",
                 budgets=budgets)
    start = time.perf_counter()
    graph = TokenisationGraph(counts, graph_cap)
    graph_seconds = time.perf_counter() - start
    relaxations = relax_budgets(
        graph, list(budgets), solver=solver, min_frequency=min_frequency,
        max_token_bytes=None if solver == "dual" else max_token_bytes,
        initial_colours=initial_colours, rounds=rounds, time_limit=time_limit, tolerance=tolerance, threads=threads,
        progress=progress,
    )
    for budget, relaxation in zip(budgets, relaxations):
        steps = 0 if stopped_early(relaxation.solution.status) else subgradient_steps
        yield _fit(relaxation, budget, counts, roundings, steps, {"graph": graph_seconds})
        del relaxation


def _fit(relaxation: Relaxation, budget: int, counts: PreTokenCounts, roundings: tuple[str, ...],
         subgradient_steps: int, seconds: dict[str, float]) -> ConvexFit:
    """Rounds and certifies one solved relaxation."""
    graph = relaxation.graph
    seconds = {**seconds, "solve": relaxation.seconds}
    start = time.perf_counter()
    vocabularies: dict[str, list[bytes]] = {}
    tokens: dict[str, int] = {}
    for rounding in roundings:
        if rounding == "price":
            continue
        chosen = round_colours(relaxation, rounding, budget)
        vocabularies[rounding] = graph.colour_bytes(chosen)
        tokens[rounding] = shortest_path_tokens(single_bytes() + vocabularies[rounding], counts)
    seconds["round"] = time.perf_counter() - start
    start = time.perf_counter()
    observe = None
    if "price" in roundings:
        # Price rounding at every point the certification evaluates, keeping the best; the one
        # at the solver's own prices is the subgradient target when the LP point (and so Det)
        # is poor, e.g. after a time-limited solve.
        def observe(prices: np.ndarray) -> None:
            _add_price_rounding(prices, relaxation, budget, counts, vocabularies, tokens)

        relaxation.certify(steps=0, observe=observe)
    best_known = min(tokens.values()) if tokens else None
    certificate = relaxation.certify(upper_bound=best_known, steps=subgradient_steps, observe=observe)
    seconds["certify"] = time.perf_counter() - start
    return ConvexFit(relaxation, certificate.bound, budget, graph.certificate_covers(budget), vocabularies,
                     tokens, certificate.history, seconds)


def _add_price_rounding(prices, relaxation, budget, counts, vocabularies, tokens) -> None:
    """Records the price rounding at `prices` if it beats the one already recorded."""
    chosen = round_colours(relaxation, "price", budget, prices=prices)
    vocabulary = relaxation.graph.colour_bytes(chosen)
    count = shortest_path_tokens(single_bytes() + vocabulary, counts)
    if "price" not in tokens or count < tokens["price"]:
        vocabularies["price"], tokens["price"] = vocabulary, count


def check_options(
    *,
    rounding: str = "det",
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    memory_limit: int | str | None = None,
    **_: Any,
) -> None:
    """Refuses option values ConvexTok training cannot use (`train` checks them before counting)."""
    check_rounding(rounding)
    memory.parse_size(memory_limit)
    check_relax_options(solver=solver, min_frequency=min_frequency, max_token_bytes=max_token_bytes,
                        time_limit=time_limit, tolerance=tolerance)


def train_convex(
    counts: PreTokenCounts,
    *,
    budget: int | list[int],
    special_tokens: list[str] | None = None,
    rounding: str = "det",
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    initial_colours: int | str | None = "auto",
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    memory_limit: int | str | None = None,
    num_threads: int | None = None,
    progress: bool = False,
) -> "Tokenizer | list[Tokenizer]":
    """Trains a ConvexTok tokeniser of the 256 bytes, `budget` learned tokens and the special
    tokens, and attaches its certificate (bound, gap, solver status) to it; a list of budgets
    gives one tokeniser per budget from one run (`fit_convex_budgets`). By default the first
    LP holds the colours of largest potential saving (`default_initial_colours`) and `rounds` of
    column generation add the colours that would lower it (initial_colours=None: every colour
    from the start)."""
    special_tokens = list(special_tokens or [])
    budgets = list(budget) if isinstance(budget, (list, tuple)) else [budget]
    fits = fit_convex_budgets(
        counts, budgets, roundings=(rounding,), solver=solver, max_token_bytes=max_token_bytes,
        min_frequency=min_frequency, initial_colours=initial_colours, rounds=rounds, time_limit=time_limit,
        tolerance=tolerance, threads=num_threads, progress=progress, memory_limit=memory_limit,
    )
    tokenizers = []
    for fit in fits:
        solution = fit.relaxation.solution
        certificate = Certificate.from_counts(
            bound=fit.bound, budget=fit.budget, covers=fit.covers, tokens=fit.tokens[rounding],
            shortest_path_tokens=fit.tokens[rounding], solver=solution.solver, status=solution.status,
            residuals=solution.residuals, seconds=sum(fit.seconds.values()),
        )
        vocabulary = single_bytes() + fit.vocabularies[rounding]
        training = {
            "algorithm": "convex", "budget": fit.budget, "rounding": rounding, "solver": solution.solver,
            "min_frequency": min_frequency, "max_token_bytes": max_token_bytes,
            "initial_colours": default_initial_colours(fit.budget) if initial_colours == "auto" else initial_colours,
            # Per-round LP sizes and statuses, without wall times: the file stays reproducible.
            "rounds": [{key: value for key, value in round_.items() if key != "seconds"}
                       for round_ in fit.relaxation.rounds],
            "tolerance": tolerance, "pre_tokens": len(counts),
        }
        tokenizers.append(_make_tokenizer(vocabulary, counts.pattern, special_tokens, training, certificate.to_dict()))
        del fit
    return tokenizers if isinstance(budget, (list, tuple)) else tokenizers[0]


def _make_tokenizer(vocabulary, pattern, special_tokens, training, certificate):
    """The one place that constructs this trainer's Tokenizer."""
    specials = {token: len(vocabulary) + i for i, token in enumerate(special_tokens)}
    return Tokenizer(
        vocabulary, segmenter="shortest_path", pattern=pattern, special_tokens=specials,
        algorithm="convex", training=training, certificate=certificate,
    )
