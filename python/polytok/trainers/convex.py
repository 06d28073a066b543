"""ConvexTok training (paper, section 3.3): solve the LP relaxation, round its colour values to a
vocabulary, and certify the result against a lower bound on the full tokenisation graph.

Roundings of the LP colour values c_t (ties broken by colour frequency, then bytes):
- "det": the K largest c_t;
- "bias": the K largest c_t / length(t), favouring shorter tokens;
- "int": only the colours with c_t >= 1 - INTEGRAL_TOLERANCE (usually fewer than K);
- "price": the K largest Lagrangian prices M_t on the full graph (from the certificate), an
  extra rounding that needs no primal point and so survives an unconverged solve.
The tokeniser segments with `shortest_path` (fewest tokens), the segmentation the LP models.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from polytok.certify import Certificate
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import Relaxation, check_relax_options, default_initial_colours, relax

if TYPE_CHECKING:
    from polytok.tokenizer import Tokenizer

ROUNDINGS = ("det", "bias", "int", "price")
INTEGRAL_TOLERANCE = 1e-3


def round_colours(
    relaxation: Relaxation, rounding: str, budget: int, prices: np.ndarray | None = None
) -> np.ndarray:
    """Full-graph colour ids chosen by `rounding`, best first (at most `budget`)."""
    graph = relaxation.graph
    values = relaxation.colour_values
    check_rounding(rounding)
    if rounding == "det":
        score = values
    elif rounding == "bias":
        score = values / graph.colour_lengths
    elif rounding == "int":
        score = np.where(values >= 1.0 - INTEGRAL_TOLERANCE, values, 0.0)
    elif rounding == "price":
        if prices is None:
            raise ConfigError('rounding="price" needs the Lagrangian colour prices')
        score = prices
    # Order: score descending, then weighted frequency descending, then colour id (first
    # occurrence in the sorted pre-tokens), so the result never depends on solver noise order.
    order = np.lexsort((np.arange(graph.num_colours), -graph.colour_frequencies.astype(np.float64), -score))
    chosen = order[: min(budget, graph.num_colours)]
    # Det, Bias and Price fill the whole budget (a token more never adds tokens under
    # shortest-path segmentation); Int keeps only the colours the LP already set to one.
    return chosen[score[chosen] > 0] if rounding == "int" else chosen


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
    initial_colours: int | None = None,
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    subgradient_steps: int = 30,
    threads: int | None = None,
    progress: bool = False,
) -> ConvexFit:
    """Solves, rounds (every rounding in `roundings`) and certifies. The bound is on the full
    graph of `counts` (no length cap), so it covers every vocabulary of `budget` tokens."""
    for rounding in roundings:
        check_rounding(rounding)
    seconds: dict[str, float] = {}
    start = time.perf_counter()
    graph = TokenisationGraph(counts)
    seconds["graph"] = time.perf_counter() - start
    relaxation = relax(
        graph, budget, solver=solver, min_frequency=min_frequency, max_token_bytes=max_token_bytes,
        initial_colours=initial_colours, rounds=rounds, time_limit=time_limit, tolerance=tolerance, threads=threads, progress=progress,
    )
    seconds["solve"] = relaxation.seconds
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
    return ConvexFit(relaxation, certificate.bound, budget, graph.covers(budget), vocabularies,
                     tokens, certificate.history, seconds)


def _add_price_rounding(prices, relaxation, budget, counts, vocabularies, tokens) -> None:
    """Records the price rounding at `prices` if it beats the one already recorded."""
    chosen = round_colours(relaxation, "price", budget, prices=prices)
    vocabulary = relaxation.graph.colour_bytes(chosen)
    count = shortest_path_tokens(single_bytes() + vocabulary, counts)
    if "price" not in tokens or count < tokens["price"]:
        vocabularies["price"], tokens["price"] = vocabulary, count


def check_rounding(rounding: str) -> None:
    """Refuses a rounding name that is not one of ROUNDINGS."""
    if rounding not in ROUNDINGS:
        raise ConfigError(f"unknown rounding {rounding!r}; expected one of {', '.join(ROUNDINGS)}")


def check_options(
    *,
    rounding: str = "det",
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    **_: Any,
) -> None:
    """Refuses option values ConvexTok training cannot use (`train` checks them before counting)."""
    check_rounding(rounding)
    check_relax_options(solver=solver, min_frequency=min_frequency, max_token_bytes=max_token_bytes,
                        time_limit=time_limit, tolerance=tolerance)


def train_convex(
    counts: PreTokenCounts,
    *,
    budget: int,
    special_tokens: list[str] | None = None,
    rounding: str = "det",
    solver: str = "auto",
    max_token_bytes: int | None = None,
    min_frequency: int = 1,
    initial_colours: int | str | None = "auto",
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    num_threads: int | None = None,
    progress: bool = False,
) -> "Tokenizer":
    """Trains a ConvexTok tokeniser of the 256 bytes, `budget` learned tokens and the special
    tokens, and attaches its certificate (bound, gap, solver status) to it. By default the first
    LP holds the colours of largest potential saving (`default_initial_colours`) and `rounds` of
    column generation add the colours that would lower it (initial_colours=None: every colour
    from the start)."""
    special_tokens = list(special_tokens or [])
    if initial_colours == "auto":
        initial_colours = default_initial_colours(budget)
    fit = fit_convex(
        counts, budget, roundings=(rounding,), solver=solver, max_token_bytes=max_token_bytes,
        min_frequency=min_frequency, initial_colours=initial_colours, rounds=rounds, time_limit=time_limit,
        tolerance=tolerance, threads=num_threads, progress=progress,
    )
    solution = fit.relaxation.solution
    certificate = Certificate.from_counts(
        bound=fit.bound, budget=budget, covers=fit.covers, tokens=fit.tokens[rounding],
        shortest_path_tokens=fit.tokens[rounding], solver=solution.solver, status=solution.status,
        residuals=solution.residuals, seconds=sum(fit.seconds.values()),
    )
    vocabulary = single_bytes() + fit.vocabularies[rounding]
    training = {
        "algorithm": "convex", "budget": budget, "rounding": rounding, "solver": solution.solver,
        "min_frequency": min_frequency, "max_token_bytes": max_token_bytes,
        "initial_colours": initial_colours,
        # Per-round LP sizes and statuses, without wall times: the file stays reproducible.
        "rounds": [{key: value for key, value in round_.items() if key != "seconds"} for round_ in fit.relaxation.rounds],
        "tolerance": tolerance, "pre_tokens": len(counts),
    }
    return _make_tokenizer(vocabulary, counts.pattern, special_tokens, training, certificate.to_dict())


def _make_tokenizer(vocabulary, pattern, special_tokens, training, certificate):
    """The one place that constructs a Tokenizer (imported lazily: tokenizer.py is its own
    module, and this trainer works without it for fitting and certification)."""
    from polytok.tokenizer import Tokenizer

    specials = {token: len(vocabulary) + i for i, token in enumerate(special_tokens)}
    return Tokenizer(
        vocabulary, segmenter="shortest_path", pattern=pattern, special_tokens=specials,
        algorithm="convex", training=training, certificate=certificate,
    )
