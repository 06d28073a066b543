"""Certified bounds: valid for any duals, tight at optimal duals, the matrix and Lagrangian forms
agree, and a pruned or capped LP optimum is never reported as a bound."""
import collections
import random

import numpy as np
import pytest

from polytok.counts import PreTokenCounts
from polytok.lp.bound import certify_on_full_graph, lagrangian, matrix_bound, top_k
from polytok.lp.graph import LinearProgram, TokenisationGraph
from polytok.lp.relax import relax
from polytok.lp.solvers import solve
from polytok.pretokenize import PreTokenizer


def random_counts(seed: int) -> PreTokenCounts:
    rng = random.Random(seed)
    words = {}
    for _ in range(rng.randint(2, 12)):
        word = bytes(rng.choice(b"abcd") for _ in range(rng.randint(1, 7)))
        words[word] = rng.randint(1, 5)
    return PreTokenCounts.from_dict(words)


def excerpt_counts(size: int) -> PreTokenCounts:
    splitter = PreTokenizer("cl100k")
    counter = collections.Counter()
    for name in ("handbook-en-US.txt", "handbook-es-ES.txt", "python-textwrap.py.txt"):
        with open(f"tests/data/{name}", encoding="utf-8") as handle:
            counter.update(splitter.split(handle.read()[:size]))
    return PreTokenCounts.from_dict(counter, "cl100k")


@pytest.mark.parametrize("seed", range(20))
def test_bound_below_optimum_for_any_duals(seed):
    graph = TokenisationGraph(random_counts(seed))
    budget = seed % 4
    lp = graph.linear_program(budget)
    exact = solve(lp, "highs")
    rng = np.random.default_rng(seed)
    tries = {
        "optimal": exact.duals,
        "zero": np.zeros(lp.shape[0]),
        "perturbed": exact.duals + rng.normal(0, 0.5, lp.shape[0]),
        "random": rng.normal(0, 3, lp.shape[0]),
        "wrong signs": -exact.duals,
    }
    for name, duals in tries.items():
        assert matrix_bound(lp, duals) <= exact.objective + 1e-9, name
    assert matrix_bound(lp, exact.duals) == pytest.approx(exact.objective, rel=1e-6)
    # Zero duals: every variable at its best box value, i.e. only the constant survives.
    assert matrix_bound(lp, np.zeros(lp.shape[0])) == pytest.approx(lp.constant, abs=1e-9)


def lagrangian_lp(lp: LinearProgram, edge_prices: np.ndarray) -> LinearProgram:
    """The LP with p_e <= c_t dualised at prices mu: its optimum is L(mu) exactly."""
    colour_prices = np.bincount(lp.priced_colour, weights=edge_prices, minlength=lp.num_colours)
    objective = lp.objective.copy()
    objective[lp.priced_columns] += edge_prices
    objective[lp.colour_columns] -= colour_prices
    keep = np.r_[0:lp.num_flow_rows, lp.shape[0] - 1]
    return LinearProgram(**{**lp.__dict__, "objective": objective, "matrix": lp.matrix[keep],
                            "row_lower": lp.row_lower[keep], "row_upper": lp.row_upper[keep]})


@pytest.mark.parametrize("seed", range(12))
def test_lagrangian_equals_matrix_bound_for_the_same_prices(seed):
    graph = TokenisationGraph(random_counts(100 + seed))
    budget = 1 + seed % 3
    lp = graph.linear_program(budget)
    rng = np.random.default_rng(seed)
    edge_prices = rng.exponential(2.0, lp.num_priced) * (rng.random(lp.num_priced) < 0.7)
    value = lagrangian(graph, graph.core.prices_from_lp(edge_prices), budget)
    # The same prices as capacity-row duals, with the best flow and budget duals for them.
    inner = solve(lagrangian_lp(lp, edge_prices), "highs")
    duals = np.zeros(lp.shape[0])
    duals[: lp.num_flow_rows] = inner.duals[:-1]
    duals[lp.capacity_rows] = -edge_prices
    duals[-1] = inner.duals[-1]
    assert value.value == pytest.approx(inner.objective, rel=1e-6)
    assert value.bound == pytest.approx(matrix_bound(lp, duals), rel=1e-6)
    # Any other flow or budget duals give a matrix bound no higher.
    duals[: lp.num_flow_rows] += rng.normal(0, 1, lp.num_flow_rows)
    assert matrix_bound(lp, duals) <= value.value + 1e-9
    assert value.value <= solve(lp, "highs").objective + 1e-9


@pytest.mark.parametrize("seed", range(8))
def test_lagrangian_at_optimal_duals_reaches_the_optimum(seed):
    graph = TokenisationGraph(random_counts(200 + seed))
    lp = graph.linear_program(2)
    exact = solve(lp, "highs")
    certificate = certify_on_full_graph(graph, lp, exact.duals, 2)
    assert certificate.bound == pytest.approx(exact.objective, rel=1e-6)
    assert certificate.bound <= exact.objective


def test_pruned_lp_optimum_is_not_reported_as_a_bound():
    counts = excerpt_counts(2000)
    budget = 64
    graph = TokenisationGraph(counts)
    full = solve(graph.linear_program(budget), "highs").objective
    pruned_lp = graph.linear_program(budget, min_frequency=8)
    pruned = solve(pruned_lp, "highs")
    # The restriction's optimum lies above the true optimum: it is no bound.
    assert pruned.objective > full * 1.01
    certificate = certify_on_full_graph(graph, pruned_lp, pruned.duals, budget)
    assert certificate.bound <= full + 1e-6
    # Column generation recovers the full optimum from the pruned start.
    relaxation = relax(graph, budget, solver="highs", min_frequency=8, rounds=6)
    assert relaxation.certify().bound == pytest.approx(full, rel=1e-6)
    assert relaxation.rounds[0]["improving_colours"] > 0


def test_capped_lp_optimum_is_not_reported_as_a_bound():
    counts = excerpt_counts(2000)
    budget = 64
    graph = TokenisationGraph(counts)
    full = solve(graph.linear_program(budget), "highs").objective
    relaxation = relax(graph, budget, solver="highs", max_token_bytes=3)
    assert relaxation.solution.objective > full * 1.01
    assert relaxation.certify().bound <= full + 1e-6


def test_subgradient_steps_never_lower_the_bound():
    counts = excerpt_counts(2000)
    graph = TokenisationGraph(counts)
    lp = graph.linear_program(32, min_frequency=4)
    rough = solve(lp, "highs-ipm", tolerance=1e-2)
    start = certify_on_full_graph(graph, lp, rough.duals, 32)
    improved = certify_on_full_graph(graph, lp, rough.duals, 32, upper_bound=start.bound * 1.05, steps=5)
    assert improved.bound >= start.bound
    assert improved.bound == max(improved.history)
    assert improved.bound <= solve(graph.linear_program(32), "highs").objective + 1e-6


def test_pdlp_bound_within_half_a_percent_of_simplex():
    pytest.importorskip("ortools")
    counts = excerpt_counts(2500)
    graph = TokenisationGraph(counts)
    for budget in (16, 96):
        lp = graph.linear_program(budget)
        exact = solve(lp, "highs").objective
        first_order = solve(lp, "pdlp", tolerance=1e-4, threads=1)
        bound = certify_on_full_graph(graph, lp, first_order.duals, budget).bound
        assert exact * 0.995 <= bound <= exact + 1e-6


def test_interrupted_solve_still_gives_a_valid_bound():
    pytest.importorskip("ortools")
    counts = excerpt_counts(2000)
    graph = TokenisationGraph(counts)
    lp = graph.linear_program(48)
    exact = solve(lp, "highs").objective
    stopped = solve(lp, "pdlp", time_limit=0.01, threads=1)
    assert stopped.status != "OPTIMAL"
    assert certify_on_full_graph(graph, lp, stopped.duals, 48).bound <= exact


def test_cuopt_bound_matches_simplex():
    from polytok.lp.solvers import available

    if not available("cuopt"):
        pytest.skip("cuOpt needs the polytok[gpu] extra and a GPU")
    counts = excerpt_counts(4000)
    graph = TokenisationGraph(counts)
    lp = graph.linear_program(64)
    exact = solve(lp, "highs").objective
    bound = certify_on_full_graph(graph, lp, solve(lp, "cuopt").duals, 64).bound
    assert exact * 0.995 <= bound <= exact + 1e-6


@pytest.mark.parametrize("seed", range(20))
def test_top_k_is_the_first_k_of_the_full_order(seed):
    """Largest first, ties by lower index, with many ties (as tied colours all sit at lambda)."""
    rng = np.random.default_rng(seed)
    prices = rng.integers(0, 6, size=int(rng.integers(1, 300))).astype(np.float64)
    full = np.lexsort((np.arange(len(prices)), -prices))
    for budget in (0, 1, 2, len(prices) // 3, len(prices) - 1, len(prices), len(prices) + 5):
        assert top_k(prices, budget).tolist() == full[:max(budget, 0)].tolist()
