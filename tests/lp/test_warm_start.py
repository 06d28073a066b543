"""Warm starts across column-generation rounds: the carried point is exact, and PDLP uses it."""
import numpy as np
import pytest

from polytok.lp.bound import matrix_bound
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import carry_over, relax, saved_point
from polytok.lp.solvers import _residuals, solve
from test_bound import excerpt_counts


def savings_order(graph: TokenisationGraph) -> np.ndarray:
    return np.lexsort((np.arange(graph.num_colours), -graph.colour_frequencies * (graph.colour_lengths - 1.0)))


def candidates(graph: TokenisationGraph, order: np.ndarray, count: int) -> np.ndarray:
    flags = np.zeros(graph.num_colours, dtype=bool)
    flags[order[:count]] = True
    return flags


def test_carrying_an_optimum_onto_the_same_lp_reproduces_it():
    """Flows, free-chain remainders, prices and shortest-path potentials rebuild the optimum:
    a mapping error anywhere would move the objective or the dual bound."""
    graph = TokenisationGraph(excerpt_counts(4000))
    order = savings_order(graph)
    budget = 48
    lp = graph.linear_program_over(budget, candidates(graph, order, 120))
    exact = solve(lp, "highs")
    point = saved_point(graph, lp, exact)
    rebuilt = graph.linear_program_over(budget, candidates(graph, order, 120))
    primal, duals = carry_over(graph, rebuilt, *point)
    assert rebuilt.objective @ primal + rebuilt.constant == pytest.approx(exact.objective, rel=1e-9)
    assert matrix_bound(rebuilt, duals) == pytest.approx(exact.objective, rel=1e-6)
    assert max(_residuals(rebuilt, primal).values()) <= 1e-9


def test_carried_point_is_feasible_in_the_larger_lp():
    """New colours and edges start at 0, so the previous optimum stays feasible with the same
    objective in the next round's LP (whose segments merge and whose chains split)."""
    graph = TokenisationGraph(excerpt_counts(4000))
    order = savings_order(graph)
    budget = 48
    lp = graph.linear_program_over(budget, candidates(graph, order, 60))
    exact = solve(lp, "highs")
    point = saved_point(graph, lp, exact)
    larger = graph.linear_program_over(budget, candidates(graph, order, 400))
    primal, duals = carry_over(graph, larger, *point)
    assert larger.shape[1] > lp.shape[1]
    assert max(_residuals(larger, primal).values()) <= 1e-9
    assert larger.objective @ primal + larger.constant == pytest.approx(exact.objective, rel=1e-9)
    assert matrix_bound(larger, duals) <= solve(larger, "highs").objective + 1e-6


def test_warm_started_round_reaches_the_same_optimum_and_bound():
    pytest.importorskip("ortools")
    graph = TokenisationGraph(excerpt_counts(4000))
    budget = 48
    runs, bounds, optima = {}, {}, {}
    for warm in (False, True):
        runs[warm] = relax(graph, budget, solver="pdlp", initial_colours=100, rounds=1, threads=1,
                           warm_start=warm)
        # Certify before the next relax rebuilds the graph's LP.
        bounds[warm] = runs[warm].certify().bound
        optima[warm] = solve(runs[warm].lp, "highs").objective
    assert [entry["warm_started"] for entry in runs[True].rounds] == [False, True]
    assert [entry["warm_started"] for entry in runs[False].rounds] == [False, False]
    # Round 0 is the same cold solve, so round 1 solves the same LP from two starting points.
    assert runs[True].rounds[1]["variables"] == runs[False].rounds[1]["variables"]
    assert optima[True] == pytest.approx(optima[False], rel=1e-12)
    for warm, relaxation in runs.items():
        assert relaxation.solution.objective == pytest.approx(optima[warm], rel=1e-3)
    full_optimum = solve(graph.linear_program(budget), "highs").objective
    assert bounds[True] <= full_optimum + 1e-6
    assert bounds[True] >= bounds[False] - 1e-3 * abs(bounds[False])


def test_screening_rounds_stop_early_and_the_final_solve_reaches_the_tolerance():
    """Rounds before the last stop at the loose screening tolerance; when one finds no colour to
    add, the same LP is continued, warm, to the final tolerance, so the result is as accurate
    as an unscreened solve. An LP with every colour in needs no screening at all."""
    pytest.importorskip("ortools")
    graph = TokenisationGraph(excerpt_counts(4000))
    budget = 48
    optimum = solve(graph.linear_program(budget), "highs").objective
    everything = relax(graph, budget, solver="pdlp", rounds=2, threads=1, tolerance=1e-6,
                       screening_tolerance=1e-2)
    assert [entry["tolerance"] for entry in everything.rounds] == [1e-6]
    assert everything.solution.objective == pytest.approx(optimum, rel=1e-5)
    # All but the colours of least potential saving: nothing is left to add, so the screened
    # LP is finished in place.
    nearly = relax(graph, budget, solver="pdlp", initial_colours=graph.num_colours - 50, rounds=2,
                   threads=1, tolerance=1e-6, screening_tolerance=1e-2)
    assert [entry["tolerance"] for entry in nearly.rounds] == [1e-2, 1e-6]
    assert [entry["warm_started"] for entry in nearly.rounds] == [False, True]
    assert nearly.rounds[0]["variables"] == nearly.rounds[1]["variables"]
    assert [entry["improving_colours"] for entry in nearly.rounds] == [0, 0]
    assert nearly.solution.objective == pytest.approx(optimum, rel=1e-5)
    assert nearly.certify().bound == pytest.approx(optimum, rel=1e-4)
    # Column generation: screening solves, then the last round at the final tolerance.
    generated = relax(graph, budget, solver="pdlp", initial_colours=60, rounds=2, threads=1,
                      tolerance=1e-6, screening_tolerance=1e-2)
    tolerances = [entry["tolerance"] for entry in generated.rounds]
    assert tolerances[-1] == 1e-6 and set(tolerances[:-1]) == {1e-2}
    assert generated.certify().bound <= optimum + 1e-6
    assert generated.certify().bound == pytest.approx(optimum, rel=1e-3)
    # Simplex has no tolerance to loosen: every round is solved exactly.
    exact = relax(graph, budget, solver="highs", initial_colours=60, rounds=1, screening_tolerance=1e-2)
    assert {entry["tolerance"] for entry in exact.rounds} == {1e-4}
