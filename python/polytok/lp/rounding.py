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


def check_rounding(rounding: str) -> None:
    """Refuses a rounding name that is not one of ROUNDINGS."""
    if rounding not in ROUNDINGS:
        raise ConfigError(f"unknown rounding {rounding!r}; expected one of {', '.join(ROUNDINGS)}")
