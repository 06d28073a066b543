"""ConvexTok's roundings: an LP relaxation's colour values (or Lagrangian prices) to K tokens.

Roundings of the LP colour values c_t (ties broken by colour frequency, then bytes):
- "det": the K largest c_t;
- "bias": the K largest c_t / length(t), favouring shorter tokens;
- "int": only the colours with c_t >= 1 - INTEGRAL_TOLERANCE (usually fewer than K);
- "price": the K largest Lagrangian prices M_t on the full graph (from the certificate), an
  extra rounding that needs no primal point and so survives an unconverged solve.
"""
from __future__ import annotations

import numpy as np

from polytok.errors import ConfigError
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import Relaxation

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
        score = values / graph.core.colour_lengths()
    elif rounding == "int":
        score = np.where(values >= 1.0 - INTEGRAL_TOLERANCE, values, 0.0)
    elif rounding == "price":
        if prices is None:
            raise ConfigError('rounding="price" needs the Lagrangian colour prices')
        score = prices
    # Det, Bias and Price fill the whole budget (a token more never adds tokens under
    # shortest-path segmentation); Int keeps only the colours the LP already set to one.
    return best_colours(graph, score, budget, positive=rounding == "int")


def best_colours(graph: TokenisationGraph, score: np.ndarray, budget: int, positive: bool = False) -> np.ndarray:
    """The `budget` colours first in the order score descending, then weighted frequency
    descending, then colour id (first occurrence in the sorted pre-tokens), so the result never
    depends on solver noise order; with `positive`, only those of score > 0. Only the colours at
    or above the K-th largest score are sorted: at the paper's scale there are tens of millions."""
    among = np.flatnonzero(score > 0) if positive else None
    values = score if among is None else score[among]
    budget = min(budget, len(values))
    if budget == 0:
        return np.zeros(0, dtype=np.int64)
    kth = np.partition(values, len(values) - budget)[len(values) - budget]
    ids = np.flatnonzero(values >= kth)
    if among is not None:
        ids = among[ids]
    frequencies = graph.core.colour_frequencies()[ids].astype(np.float64)
    return ids[np.lexsort((ids, -frequencies, -score[ids]))][:budget]


def check_rounding(rounding: str) -> None:
    """Refuses a rounding name that is not one of ROUNDINGS."""
    if rounding not in ROUNDINGS:
        raise ConfigError(f"unknown rounding {rounding!r}; expected one of {', '.join(ROUNDINGS)}")
