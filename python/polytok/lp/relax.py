"""Column generation, the whole LP pipeline: build the reduced LP over candidate colours, solve
it, price the colours left out on the full graph, add those that would improve the LP, and
repeat. Its result carries the LP point for rounding and the duals for certification.
With solver="dual" it builds no LP: smoothed dual ascent on the full graph (dual.py) gives the
edge prices and colour values directly.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Iterator

import numpy as np
import scipy.sparse
import scipy.sparse.csgraph

from polytok.errors import ConfigError
from polytok.lp.bound import (
    FullGraphCertificate,
    certify_on_full_graph,
    certify_prices,
    dropped_colour_excess,
    project_duals,
)
from polytok.lp.dual import dual_ascent_budgets
from polytok.lp.graph import LinearProgram, TokenisationGraph
from polytok.lp.memory import check_lp
from polytok.lp.solvers import SOLVERS, Solution, resolve, solve
from polytok.progress import progress_bar

RELAX_SOLVERS = SOLVERS + ("dual",)
"""Every `relax` solver: the LP backends and the LP-free dual ascent."""

_DUAL_RESTRICTION = (
    'solver="dual" works on the graph it is given: min_frequency and max_token_bytes restrict '
    "the LP, so they apply to the LP solvers only (for the dual solver, cap the graph: "
    "TokenisationGraph(counts, max_token_bytes))"
)


def default_initial_colours(budget: int) -> int:
    """Colours in the first LP of column generation, of largest potential saving: about as many
    as the optimum uses, 4K at small K, 8192 from K=2048, 1.5K from K=5462 (on the 1 MB
    benchmark c > 0 on 1.5K colours at K=8192). Fewer leave the first LP's duals overpricing
    most colours, more only make both solves slower."""
    return max(1024, min(4 * budget, max(8192, 3 * budget // 2)))


@dataclass
class Relaxation:
    """An (approximately) solved LP relaxation on a full tokenisation graph."""

    graph: TokenisationGraph = field(repr=False)
    lp: LinearProgram | None = field(repr=False)
    """The last reduced LP solved; None for the dual solver, whose `solution.duals` are
    full-graph edge prices."""
    solution: Solution
    colour_values: np.ndarray = field(repr=False)
    """LP value c_t of every full-graph colour (0 for colours outside the reduced LP)."""
    rounds: list[dict]
    seconds: float
    budget: int

    def certify(self, upper_bound: float | None = None, steps: int = 5, observe=None) -> FullGraphCertificate:
        """A certified bound on the full graph from this solve's duals (see bound.py)."""
        if self.lp is None:
            return certify_prices(self.graph, self.solution.duals, self.budget,
                                  upper_bound=upper_bound, steps=steps, observe=observe)
        return certify_on_full_graph(
            self.graph, self.lp, self.solution.duals, self.budget,
            upper_bound=upper_bound, steps=steps, observe=observe,
        )


def check_relax_options(
    *,
    solver: str = "auto",
    min_frequency: int = 1,
    max_token_bytes: int | None = None,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
) -> None:
    """Refuses option values `relax` cannot use, before any graph is built (so that `train` and
    `certify` can check them before counting a corpus)."""
    if solver not in RELAX_SOLVERS:
        raise ConfigError(f"unknown solver {solver!r}; expected one of {', '.join(RELAX_SOLVERS)}")
    if max_token_bytes is not None and max_token_bytes < 2:
        raise ConfigError(f"max_token_bytes must be at least 2 or None, got {max_token_bytes}")
    if solver == "dual" and min_frequency > 1:
        raise ConfigError(_DUAL_RESTRICTION)
    if time_limit is not None and not time_limit > 0:
        raise ConfigError(f"time_limit must be > 0 seconds, got {time_limit}")
    if not tolerance > 0:
        raise ConfigError(f"tolerance must be > 0, got {tolerance}")


def relax(
    graph: TokenisationGraph,
    budget: int,
    *,
    solver: str = "auto",
    min_frequency: int = 1,
    max_token_bytes: int | None = None,
    initial_colours: int | None = None,
    rounds: int = 0,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    threads: int | None = None,
    progress: bool = False,
    warm_start: bool = True,
    screening_tolerance: float | None = 3e-3,
) -> Relaxation:
    """Solves the LP over candidate colours (weighted frequency >= min_frequency, at most
    max_token_bytes bytes and, with `initial_colours`, only that many of largest potential
    saving frequency x (length - 1)), then up to `rounds` times adds the left-out colours whose
    price on the full graph exceeds the K-th largest LP colour price (they could lower the LP)
    and solves again. `time_limit` bounds each solve; the duals of a stopped solve still certify.
    With `warm_start`, each round after the first starts the solver (PDLP) from the previous
    round's point carried over to the larger LP (see `carry_over`). Rounds before the last stop
    at `screening_tolerance`: their duals only price the left-out colours and their point only
    starts the next solve, so only the final solve needs `tolerance` (a screening solve that
    finds nothing to add is continued, warm, to `tolerance`; an LP that already holds every
    colour is solved to `tolerance` at once).

    solver="dual" runs `polytok.lp.dual.dual_ascent` on the full graph instead. It takes no
    candidate restriction (`min_frequency` and `max_token_bytes` must keep their defaults), and
    `initial_colours`, `rounds`, `threads` and `warm_start` do not apply to it."""
    if budget < 0:
        raise ConfigError(f"the budget K must be >= 0, got {budget}")
    check_relax_options(solver=solver, min_frequency=min_frequency, max_token_bytes=max_token_bytes,
                        time_limit=time_limit, tolerance=tolerance)
    if solver == "dual":
        if max_token_bytes is not None:
            raise ConfigError(_DUAL_RESTRICTION)
        return next(_relax_dual(graph, [budget], tolerance, time_limit, progress))
    start = time.perf_counter()
    candidate = graph.colour_frequencies >= max(1, min_frequency)
    if max_token_bytes is not None:
        candidate &= graph.colour_lengths <= max_token_bytes
    if initial_colours is not None and initial_colours < int(candidate.sum()):
        # The potential saving is a colour's full-graph price at zero duals: the amount by which
        # it could shorten the paths if every occurrence were used.
        saving = np.where(candidate, graph.colour_frequencies * (graph.colour_lengths - 1.0), -1.0)
        order = np.lexsort((np.arange(graph.num_colours), -saving))
        candidate = np.zeros(graph.num_colours, dtype=bool)
        candidate[order[:initial_colours]] = True
    history: list[dict] = []
    with progress_bar(progress, total=rounds + 1, desc=f"ConvexTok LP (K={budget})", unit="solve") as bar:
        start_point = None
        # Only PDLP takes a starting point; the others would ignore it.
        warm_start = warm_start and resolve(solver) == "pdlp"
        screening = tolerance
        if screening_tolerance is not None and resolve(solver) != "highs":  # simplex has no tolerance
            screening = max(tolerance, screening_tolerance)
        addable = np.ones(graph.num_colours, dtype=bool)
        if max_token_bytes is not None:
            addable = graph.colour_lengths <= max_token_bytes
        round_number = 0
        solved = None  # the candidate colours, LP and solution of the last solve finished
        try:
            while True:
                check_lp(graph, candidate)
                lp = graph.linear_program_over(budget, candidate)
                if start_point is not None:
                    start_point = carry_over(graph, lp, *start_point)
                # With every colour already in, nothing can be added: solve to the final tolerance at once.
                final = round_number == rounds or bool(candidate[addable].all())
                solution = _solve_round(lp, solver, time_limit, tolerance if final else screening, threads,
                                        start_point, history, bar)
                solved = (candidate, lp, solution)
                excess = _improving(graph, lp, solution, budget, max_token_bytes, history)
                if not final and not excess.any() and screening > tolerance:
                    # Nothing to add: finish this LP at the final tolerance from where it stopped.
                    resume = (solution.primal, solution.duals) if warm_start else None
                    bar.total += 1
                    solution = _solve_round(lp, solver, time_limit, tolerance, threads, resume, history, bar)
                    solved = (candidate, lp, solution)
                    excess = _improving(graph, lp, solution, budget, max_token_bytes, history)
                    final = True
                bar.set_postfix(status=solution.status, improving_colours=history[-1]["improving_colours"])
                if final or not excess.any():
                    break
                candidate = candidate | (excess > 0)
                if warm_start:
                    start_point = saved_point(graph, lp, solution)
                round_number += 1
        except KeyboardInterrupt:
            return _interrupted(graph, budget, solved, history, start)
    colour_values = np.zeros(graph.num_colours)
    colour_values[lp.colours] = np.clip(solution.primal[lp.colour_columns], 0.0, 1.0)
    return Relaxation(graph, lp, solution, colour_values, history, time.perf_counter() - start, budget)


def relax_budgets(graph: TokenisationGraph, budgets: list[int], **options) -> Iterator[Relaxation]:
    """`relax` at each budget in turn on one graph, yielded as each finishes (certify one before
    asking for the next: an LP's duals map onto the graph only until the next LP is built);
    initial_colours "auto" is `default_initial_colours` of each budget. Each budget is solved
    afresh (`polytok.lp.dual.dual_ascent_budgets` explains why the dual solver does not
    warm-start by default)."""
    initial = options.pop("initial_colours", None)
    if options.get("solver", "auto") != "dual":
        for budget in budgets:
            colours = default_initial_colours(budget) if initial == "auto" else initial
            yield relax(graph, budget, initial_colours=colours, **options)
        return
    check_relax_options(**{name: options[name] for name in
                           ("solver", "min_frequency", "max_token_bytes", "time_limit", "tolerance") if name in options})
    if options.get("max_token_bytes") is not None:
        raise ConfigError(_DUAL_RESTRICTION)
    yield from _relax_dual(graph, budgets, options.get("tolerance", 1e-4), options.get("time_limit"),
                           options.get("progress", False))


def _relax_dual(graph, budgets, tolerance, time_limit, progress) -> Iterator[Relaxation]:
    """`relax` with solver="dual": smoothed dual ascent over every colour of the full graph."""
    start = time.perf_counter()
    for budget, (solution, colour_values, stages) in zip(
        budgets, dual_ascent_budgets(graph, budgets, tolerance=tolerance, time_limit=time_limit, progress=progress)
    ):
        yield Relaxation(graph, None, solution, colour_values, stages, time.perf_counter() - start, budget)
        del solution, colour_values
        start = time.perf_counter()


def _interrupted(graph, budget, solved, history, start) -> Relaxation:
    """The relaxation of a column generation stopped by Ctrl-C: the last solve that finished
    (its LP rebuilt if a later one was built since, so its duals map onto the graph again), or
    with none, zero prices (which certify the number of pre-tokens)."""
    if solved is None:
        solution = Solution(primal=np.zeros(graph.num_colours), duals=np.zeros(graph.num_edges), objective=float("nan"),
                            status="INTERRUPTED", solver="none", seconds=0.0, iterations=0, residuals={})
        return Relaxation(graph, None, solution, np.zeros(graph.num_colours), history,
                          time.perf_counter() - start, budget)
    candidate, lp, solution = solved
    if lp.build != graph.builds:
        lp = graph.linear_program_over(budget, candidate)
    solution = replace(solution, status="INTERRUPTED")
    colour_values = np.zeros(graph.num_colours)
    colour_values[lp.colours] = np.clip(solution.primal[lp.colour_columns], 0.0, 1.0)
    return Relaxation(graph, lp, solution, colour_values, history, time.perf_counter() - start, budget)


def _improving(graph, lp, solution, budget, max_token_bytes, history) -> np.ndarray:
    """How much each left-out colour's full-graph price exceeds the LP's K-th largest colour
    price (0 where it cannot lower the LP, and for colours over the length cap); their number
    goes into the latest round of `history`."""
    excess = dropped_colour_excess(graph, lp, solution.duals, budget)
    if max_token_bytes is not None:
        excess[graph.colour_lengths > max_token_bytes] = 0.0
    history[-1]["improving_colours"] = int(np.count_nonzero(excess))
    return excess


def _solve_round(lp, solver, time_limit, tolerance, threads, start_point, history, bar) -> Solution:
    """One solve of column generation, recorded in `history` and on the progress bar."""
    bar.set_postfix(variables=lp.shape[1], nonzeros=lp.matrix.nnz)
    solution = solve(lp, solver, time_limit=time_limit, tolerance=tolerance, threads=threads,
                     warm_start=start_point)
    bar.update()
    history.append({
        "round": len(history), **lp.size(), "status": solution.status, "tolerance": tolerance,
        "seconds": round(solution.seconds, 3), "iterations": solution.iterations,
        "objective": solution.objective, "warm_started": solution.warm_started,
    })
    return solution


def _edge_map(graph: TokenisationGraph, lp: LinearProgram) -> np.ndarray:
    """The reduced-LP priced edge of every full-graph edge (-1 where dropped), for the latest LP
    built on `graph`. Read back through the linear map `prices_from_lp`, which gives full edge e
    of pre-token w the price lp_mu[k] * n_w / N_k of its LP edge k: pricing k at k + 1 and at 1
    and dividing recovers k exactly (the ratio is an integer below 2^53)."""
    ones = graph.core.prices_from_lp(np.ones(lp.num_priced))
    numbered = graph.core.prices_from_lp(np.arange(1.0, lp.num_priced + 1.0))
    edge = np.full(graph.num_edges, -1, dtype=np.int64)
    mapped = ones > 0
    edge[mapped] = np.rint(numbered[mapped] / ones[mapped]).astype(np.int64) - 1
    return edge


def saved_point(
    graph: TokenisationGraph, lp: LinearProgram, solution: Solution
) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """What `carry_over` needs of a solve, in full-graph terms (the LP's own rows and columns
    do not survive a rebuild): edge flows and prices per full edge, colour values per full
    colour, and the budget row's dual."""
    edge = _edge_map(graph, lp)
    mapped = edge >= 0
    flows = np.zeros(graph.num_edges)
    flows[mapped] = solution.primal[lp.priced_columns][edge[mapped]]
    y = project_duals(lp, solution.duals)
    # Full-edge prices summed over a merged segment's occurrences give back its LP price.
    prices = graph.core.prices_from_lp(np.maximum(-y[lp.capacity_rows], 0.0))
    colour_values = np.zeros(graph.num_colours)
    colour_values[lp.colours] = solution.primal[lp.colour_columns]
    return flows, prices, colour_values, float(y[-1])


def carry_over(
    graph: TokenisationGraph, lp: LinearProgram, flows: np.ndarray, prices: np.ndarray,
    colour_values: np.ndarray, budget_dual: float,
) -> tuple[np.ndarray, np.ndarray]:
    """A starting (primal, duals) for `lp`, the next column-generation round, from the previous
    round's point (`saved_point`). Kept colours and edges keep their values and prices, new
    ones start at 0, the budget row keeps its dual. The free (byte-chain) flows are the
    remainder of each segment's unit flow across each cut, and the flow-row duals are the
    shortest-path distances under the carried prices: the duals optimal for those prices."""
    edge = _edge_map(graph, lp)
    mapped = edge >= 0
    primal = np.zeros(lp.shape[1])
    priced = np.zeros(lp.num_priced)
    priced[edge[mapped]] = flows[mapped]
    primal[lp.priced_columns] = priced
    primal[lp.colour_columns] = colour_values[lp.colours]

    # A segment's nodes are numbered consecutively along it and its free edges join consecutive
    # nodes, so the flow on free edge v -> v+1 is 1 minus the priced flow jumping over that cut.
    num_nodes = len(lp.node_row)
    priced_tail, priced_head = lp.edge_tail[lp.num_free:], lp.edge_head[lp.num_free:]
    jump = np.bincount(priced_tail, weights=priced, minlength=num_nodes)
    jump -= np.bincount(priced_head, weights=priced, minlength=num_nodes)
    primal[:lp.num_free] = np.clip(1.0 - np.cumsum(jump)[lp.edge_tail[:lp.num_free]], 0.0, 1.0)

    lp_prices = np.bincount(edge[mapped], weights=prices[mapped], minlength=lp.num_priced)
    duals = np.zeros(lp.shape[0])
    duals[lp.capacity_rows] = -lp_prices
    duals[-1] = budget_dual
    duals[:lp.num_flow_rows] = _potentials(lp, lp_prices)
    return primal, duals


def _potentials(lp: LinearProgram, lp_prices: np.ndarray) -> np.ndarray:
    """Flow-row duals optimal for the priced-edge prices `lp_prices`: each node's shortest
    distance from its segment's source, edges costing their cost plus their price."""
    cost = lp.objective[:lp.num_free + lp.num_priced].copy()
    cost[lp.num_free:] += lp_prices
    # Parallel edges (a free and a priced edge between the same nodes) keep the cheaper one;
    # a sparse matrix would add them.
    order = np.lexsort((cost, lp.edge_head, lp.edge_tail))
    tail, head, cost = lp.edge_tail[order], lp.edge_head[order], cost[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = (tail[1:] != tail[:-1]) | (head[1:] != head[:-1])
    num_nodes = len(lp.node_row)
    edges = scipy.sparse.csr_matrix((cost[first], (tail[first], head[first])), shape=(num_nodes, num_nodes))
    sources = np.flatnonzero(lp.node_row < 0)
    distance = scipy.sparse.csgraph.dijkstra(edges, directed=True, indices=sources, min_only=True)
    potentials = np.zeros(lp.num_flow_rows)
    kept = lp.node_row >= 0
    potentials[lp.node_row[kept]] = distance[kept]
    return potentials

