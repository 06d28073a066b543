"""The ConvexTok LP: tokenisation graph (graph), solvers (solvers) and certified bounds (bound).

`relax` is the whole pipeline: build the reduced LP over candidate colours, solve it, price the
colours left out on the full graph, add those that would improve the LP (column generation),
and repeat. Its result carries the LP point for rounding and the duals for certification.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from polytok.errors import ConfigError
from polytok.lp.bound import (
    FullGraphCertificate,
    certify_on_full_graph,
    dropped_colour_excess,
    lagrangian,
    matrix_bound,
)
from polytok.lp.graph import LinearProgram, TokenisationGraph
from polytok.lp.solvers import Solution, solve


@dataclass
class Relaxation:
    """An (approximately) solved LP relaxation on a full tokenisation graph."""

    graph: TokenisationGraph = field(repr=False)
    lp: LinearProgram = field(repr=False)
    solution: Solution
    colour_values: np.ndarray = field(repr=False)
    """LP value c_t of every full-graph colour (0 for colours outside the reduced LP)."""
    rounds: list[dict]
    seconds: float

    def certify(self, upper_bound: float | None = None, steps: int = 5, observe=None) -> FullGraphCertificate:
        """A certified bound on the full graph from this solve's duals (see bound.py)."""
        return certify_on_full_graph(
            self.graph, self.lp, self.solution.duals, self.lp.budget,
            upper_bound=upper_bound, steps=steps, observe=observe,
        )


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
) -> Relaxation:
    """Solves the LP over candidate colours (weighted frequency >= min_frequency, at most
    max_token_bytes bytes and, with `initial_colours`, only that many of largest potential
    saving frequency x (length - 1)), then up to `rounds` times adds the left-out colours whose
    price on the full graph exceeds the K-th largest LP colour price (they could lower the LP)
    and solves again. `time_limit` bounds each solve; the duals of a stopped solve still certify."""
    if budget < 0:
        raise ConfigError(f"the budget K must be >= 0, got {budget}")
    start = time.perf_counter()
    candidate = graph.colour_frequencies >= max(1, min_frequency)
    if max_token_bytes is not None:
        if max_token_bytes < 2:
            raise ConfigError(f"max_token_bytes must be at least 2 or None, got {max_token_bytes}")
        candidate &= graph.colour_lengths <= max_token_bytes
    if initial_colours is not None and initial_colours < int(candidate.sum()):
        # The potential saving is a colour's full-graph price at zero duals: the amount by which
        # it could shorten the paths if every occurrence were used.
        saving = np.where(candidate, graph.colour_frequencies * (graph.colour_lengths - 1.0), -1.0)
        order = np.lexsort((np.arange(graph.num_colours), -saving))
        candidate = np.zeros(graph.num_colours, dtype=bool)
        candidate[order[:initial_colours]] = True
    history: list[dict] = []
    bar = tqdm(total=rounds + 1, desc=f"ConvexTok LP (K={budget})", unit="solve", disable=not progress)
    for round_number in range(rounds + 1):
        lp = graph.linear_program_over(budget, candidate)
        bar.set_postfix(variables=lp.shape[1], nonzeros=lp.matrix.nnz)
        solution = solve(lp, solver, time_limit=time_limit, tolerance=tolerance, threads=threads)
        bar.update()
        excess = dropped_colour_excess(graph, lp, solution.duals, budget)
        if max_token_bytes is not None:
            excess[graph.colour_lengths > max_token_bytes] = 0.0
        history.append({
            "round": round_number, **lp.size(), "status": solution.status,
            "seconds": round(solution.seconds, 3), "iterations": solution.iterations,
            "objective": solution.objective, "improving_colours": int(np.count_nonzero(excess)),
        })
        bar.set_postfix(status=solution.status, improving_colours=history[-1]["improving_colours"])
        if round_number == rounds or not excess.any():
            break
        candidate = candidate | (excess > 0)
    bar.close()
    colour_values = np.zeros(graph.num_colours)
    colour_values[lp.colours] = np.clip(solution.primal[lp.colour_columns], 0.0, 1.0)
    return Relaxation(graph, lp, solution, colour_values, history, time.perf_counter() - start)


__all__ = [
    "FullGraphCertificate",
    "LinearProgram",
    "Relaxation",
    "Solution",
    "TokenisationGraph",
    "certify_on_full_graph",
    "lagrangian",
    "matrix_bound",
    "relax",
    "solve",
]
