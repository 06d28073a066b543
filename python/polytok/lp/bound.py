"""Certified lower bounds from dual vectors; never from a solver's reported objective.

Two forms, both valid for *any* dual vector, so an unconverged or inaccurate solve still gives a
true bound (only a weaker one):

* Matrix form, for an LP  min c·x  s.t.  l <= A x <= u,  0 <= x <= 1  and row duals y:
  L(y) = sum_i (y_i l_i if y_i > 0 else y_i u_i) + sum_j min(0, (c - A^T y)_j).
  A row without a finite lower (upper) bound forces y_i <= 0 (>= 0); y is projected onto that.
* Lagrangian form on the full graph: dualise p_e <= c_t with prices mu_e >= 0. The flow part
  splits per pre-token into a shortest path with costs n_w + mu_e on token edges and n_w on
  byte edges; the colour part, max over c in [0,1], sum(c) <= K of sum_t c_t M_t with
  M_t = sum of mu over the edges of colour t, is the sum of the K largest M_t. So
  L(mu) = sum_w shortestpath_w - (sum of the K largest M_t).
  With mu from the capacity-row duals, the matrix form with the same mu is never larger, and
  equal when the other duals are optimal for that mu.

Both are evaluated in float64 and lowered by a margin covering the rounding error.

The other side of the gap is a token count that some vocabulary reaches: `shortest_path_tokens`,
the corpus cut into the fewest tokens of a given vocabulary (the upper bound the subgradient
steps aim at, and what a ConvexTok rounding is scored by).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from polytok import _core
from polytok.counts import PreTokenCounts
from polytok.lp.graph import LinearProgram, TokenisationGraph

# Relative safety margin: float64 sums of n terms err by at most ~n * 2^-53 of the sum of
# magnitudes; 1e-9 of the magnitude covers every size polytok builds (n < 1e7).
RELATIVE_MARGIN = 1e-9


def project_duals(lp: LinearProgram, duals: np.ndarray) -> np.ndarray:
    """Duals with the sign each row allows: y <= 0 on rows with no lower bound, y >= 0 on rows
    with no upper bound (equalities are free)."""
    y = np.asarray(duals, dtype=np.float64).copy()
    y[np.isneginf(lp.row_lower) & (y > 0)] = 0.0
    y[np.isposinf(lp.row_upper) & (y < 0)] = 0.0
    return y


def matrix_bound(lp: LinearProgram, duals: np.ndarray) -> float:
    """Certified lower bound on the LP optimum (constant included) from row duals `duals`."""
    y = project_duals(lp, duals)
    row_terms = np.where(y > 0, y * np.where(np.isfinite(lp.row_lower), lp.row_lower, 0.0),
                         y * np.where(np.isfinite(lp.row_upper), lp.row_upper, 0.0))
    reduced = lp.objective - lp.matrix.T @ y
    column_terms = np.minimum(reduced, 0.0)
    value = float(np.sum(row_terms)) + float(np.sum(column_terms)) + lp.constant
    # Rounding error scales with the magnitudes summed: the row terms, the reduced costs that
    # count, and A^T y (c itself is exact in the counts' integers).
    magnitude = (
        float(np.sum(np.abs(row_terms))) + float(np.sum(np.abs(column_terms)))
        + float(np.sum(abs(lp.matrix).T @ np.abs(y)))
    )
    return value - RELATIVE_MARGIN * magnitude


@dataclass
class LagrangianValue:
    """L(mu) on the full graph, with the pieces a subgradient step needs."""

    bound: float
    """Certified for every vocabulary: value minus the rounding margin; on a length-capped graph,
    L at these prices extended to every longer substring (`uncapped_bound`)."""
    value: float
    shortest_paths: float
    top_prices: float
    colour_prices: np.ndarray = field(repr=False)
    on_path: np.ndarray = field(repr=False)
    chosen: np.ndarray = field(repr=False)
    """Colours whose prices form the top-K sum."""


def top_k(prices: np.ndarray, budget: int) -> np.ndarray:
    """Indices of the `budget` largest entries (ties broken by lower index), largest first."""
    budget = min(budget, len(prices))
    if budget == 0:
        return np.zeros(0, dtype=np.int64)
    # Only the entries at or above the K-th largest are sorted: at the paper's scale there are
    # tens of millions of colours and K is thousands.
    if budget < len(prices):
        kth = np.partition(prices, len(prices) - budget)[len(prices) - budget]
        candidates = np.flatnonzero(prices >= kth)
    else:
        candidates = np.arange(len(prices))
    order = candidates[np.lexsort((candidates, -prices[candidates]))]
    return order[:budget]


def lagrangian(graph: TokenisationGraph, prices: np.ndarray, budget: int) -> LagrangianValue:
    """L(mu) = sum_w shortestpath_w(n_w + mu_e) - sum of the K largest M_t, certified (on a
    capped graph, `value` is the graph's own L and `bound` the uncapped one)."""
    prices = np.ascontiguousarray(prices, dtype=np.float64)
    shortest, on_path = graph.core.shortest_paths(prices)
    colour_prices = graph.core.colour_totals(prices)
    chosen = top_k(colour_prices, budget)
    top = float(np.sum(colour_prices[chosen]))
    value = shortest - top
    if graph.max_token_bytes is None:
        bound = value - RELATIVE_MARGIN * (shortest + top)
    else:
        bound = uncapped_bound(graph, prices, colour_prices, chosen, budget, top)
    return LagrangianValue(bound, value, shortest, top, colour_prices, on_path, chosen)


def uncapped_bound(graph: TokenisationGraph, prices: np.ndarray, colour_prices: np.ndarray, chosen: np.ndarray,
                   budget: int, top: float) -> float:
    """The certified L on the *uncapped* graph of a graph capped at max_token_bytes, at its
    prices extended to the longer substrings: each long edge is priced, on the fly, at the
    K-th largest colour total theta times n_w over the smallest frequency of its windows of
    max_token_bytes bytes, so no long colour's total reaches theta and the top-K sum is the
    capped graph's (`TokenGraph::uncapped_shortest_paths`). The long edges are never stored:
    the bound covers every vocabulary at the capped graph's memory."""
    theta = float(colour_prices[chosen[-1]]) if 0 < budget == len(chosen) else 0.0
    longest = graph.core.uncapped_shortest_paths(prices, theta)
    return longest - top - RELATIVE_MARGIN * (longest + top)


def lagrangian_budgets(graph: TokenisationGraph, prices: np.ndarray, budgets: list[int]) -> np.ndarray:
    """The certified L(mu) at one set of prices for each of several budgets: one shortest-path
    pass, then the top-K sums of one sort of the colour totals. Prices found for one budget
    bound every other (L is a bound for any mu), so a run over many budgets can keep, for each,
    the best value over every price vector it evaluated."""
    if graph.max_token_bytes is not None:
        raise ValueError("lagrangian_budgets evaluates uncapped graphs only (a capped graph's bound needs "
                         "one pass per budget: use lagrangian)")
    prices = np.ascontiguousarray(prices, dtype=np.float64)
    shortest, _ = graph.core.shortest_paths(prices)
    colour_prices = graph.core.colour_totals(prices)
    # Summed from the largest down, so each top-K sum is a prefix sum of one order; only the
    # largest max(K) totals are sorted.
    largest = min(max(budgets, default=0), len(colour_prices))
    split = len(colour_prices) - largest
    descending = np.sort(np.partition(colour_prices, split)[split:] if largest else colour_prices[:0])[::-1]
    prefix = np.concatenate([[0.0], np.cumsum(descending)])
    top = prefix[np.minimum(np.asarray(budgets, dtype=np.int64), largest)]
    return shortest - top - RELATIVE_MARGIN * (shortest + top)


def _kth_largest(values: np.ndarray, budget: int) -> float:
    """The K-th largest entry, 0 when there are at most K (then every entry is in the top K)."""
    if budget == 0 or budget > len(values):
        return 0.0
    return float(np.partition(values, len(values) - budget)[len(values) - budget])


def _full_graph_prices(
    graph: TokenisationGraph, lp: LinearProgram, duals: np.ndarray, budget: int, cap: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Full-graph edge prices from an LP's duals, and the colour totals M_t before capping.

    The capacity-row duals price the LP's edges (spread over the pre-tokens of each merged
    segment); edges dropped from the LP are priced so they never undercut the path they skip.
    With `cap`, each dropped colour's total is scaled down to the K-th largest LP colour price,
    so it cannot enter the top-K sum."""
    if lp.build != graph.builds:
        raise ValueError("this LP is not the latest one built on the graph; rebuild it first")
    y = project_duals(lp, duals)
    lp_prices = np.maximum(-y[lp.capacity_rows], 0.0)
    prices = graph.core.prices_from_lp(lp_prices)
    colour_prices = graph.core.colour_totals(prices)
    dropped = np.ones(graph.num_colours, dtype=bool)
    dropped[graph.lp_colours] = False
    if not dropped.any():
        return prices, colour_prices
    prices = graph.core.price_dropped(prices)
    colour_prices = graph.core.colour_totals(prices)
    if cap:
        kth = _kth_largest(colour_prices[~dropped], budget)
        scale = np.ones(graph.num_colours)
        over = dropped & (colour_prices > kth)
        scale[over] = kth / colour_prices[over]
        prices = prices * scale[graph.edge_colours]
    return prices, colour_prices


def dropped_colour_excess(
    graph: TokenisationGraph, lp: LinearProgram, duals: np.ndarray, budget: int
) -> np.ndarray:
    """Per colour, how far its full-graph price exceeds the K-th largest LP colour price, for
    colours left out of the LP (0 elsewhere): the colours whose LP column has a negative reduced
    cost, i.e. that could lower the LP if added (column generation)."""
    _, colour_prices = _full_graph_prices(graph, lp, duals, budget, cap=False)
    dropped = np.ones(graph.num_colours, dtype=bool)
    dropped[graph.lp_colours] = False
    kth = _kth_largest(colour_prices[~dropped], budget)
    return np.where(dropped, np.maximum(colour_prices - kth, 0.0), 0.0)


@dataclass
class FullGraphCertificate:
    """The best certified Lagrangian bound found on the full graph, and its prices."""

    bound: float
    prices: np.ndarray = field(repr=False)
    colour_prices: np.ndarray = field(repr=False)
    history: list[float]
    """Bound after pricing (entry 0) and after each subgradient step."""


def certify_on_full_graph(
    graph: TokenisationGraph,
    lp: LinearProgram,
    duals: np.ndarray,
    budget: int,
    *,
    upper_bound: float | None = None,
    steps: int = 5,
    observe: Callable[[np.ndarray], None] | None = None,
) -> FullGraphCertificate:
    """A bound on the full graph from the duals of a (possibly reduced or capped) LP solve.

    The capacity-row duals give prices for the LP's edges, spread over the pre-tokens of each
    merged segment. Dropped edges are priced so they never undercut the path they skip; each
    dropped colour's total is then capped at the K-th largest LP colour price, so it cannot
    enter the top-K sum. Then as `certify_prices`."""
    prices, _ = _full_graph_prices(graph, lp, duals, budget, cap=True)
    return certify_prices(graph, prices, budget, upper_bound=upper_bound, steps=steps, observe=observe)


def certify_prices(
    graph: TokenisationGraph,
    prices: np.ndarray,
    budget: int,
    *,
    upper_bound: float | None = None,
    steps: int = 5,
    observe: Callable[[np.ndarray], None] | None = None,
) -> FullGraphCertificate:
    """The certified Lagrangian bound at full-graph edge prices `prices` (>= 0), raised by
    `steps` Polyak subgradient steps towards `upper_bound` (a known token count, e.g. of a
    rounded tokeniser); the best value is returned. `observe` is called with the colour prices
    M_t of every point evaluated (price rounding)."""
    current = lagrangian(graph, prices, budget)
    if observe is not None:
        observe(current.colour_prices)
    best, best_prices = current, prices
    history = [current.bound]
    # Polyak steps lambda (UB - L) / |g|^2 along the subgradient g_e = f_e - c_colour(e) (in
    # {-1, 0, 1}, computed edge by edge in the core); a step that does not raise the bound halves
    # lambda and restarts from the best prices.
    scale = 1.0
    for _ in range(steps if upper_bound is not None else 0):
        in_top = np.zeros(graph.num_colours, dtype=bool)
        in_top[best.chosen] = True
        norm = float(graph.core.subgradient_norm(best.on_path, in_top))
        if norm == 0.0 or upper_bound <= best.value:
            break
        prices = graph.core.subgradient_step(best_prices, best.on_path, in_top, scale * (upper_bound - best.value) / norm)
        current = lagrangian(graph, prices, budget)
        if observe is not None:
            observe(current.colour_prices)
        history.append(current.bound)
        if current.bound > best.bound:
            best, best_prices = current, prices
        else:
            scale /= 2
    return FullGraphCertificate(best.bound, best_prices, best.colour_prices, history)


def single_bytes() -> list[bytes]:
    """The 256 one-byte tokens in byte order: ids 0..255 of every vocabulary polytok trains."""
    return [bytes([b]) for b in range(256)]


def shortest_path_tokens(vocabulary: list[bytes], counts: PreTokenCounts) -> int:
    """Total tokens of the counted corpus when every pre-token is cut into the fewest tokens of
    `vocabulary` (which must hold the 256 single bytes)."""
    segmenter = _core.ShortestPathSegmenter(vocabulary)
    return int(segmenter.count_pre_tokens(counts.data, counts.offsets, counts.counts))
