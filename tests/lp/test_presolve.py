"""The single-edge-colour presolve is exact: the same optimum, a feasible expanded primal, and
expanded duals whose certified bound equals the optimum."""
import numpy as np
import pytest

from polytok.lp.bound import matrix_bound
from polytok.lp.graph import TokenisationGraph
from polytok.lp.solvers import SingleEdgeColours, _residuals, _solve_highs, solve
from test_bound import excerpt_counts, random_counts


@pytest.mark.parametrize("seed", range(15))
def test_presolved_lp_has_the_same_optimum_and_its_expanded_point_is_optimal(seed):
    graph = TokenisationGraph(random_counts(seed))
    lp = graph.linear_program(seed % 4)
    presolve = SingleEdgeColours(lp)
    unpresolved = _solve_highs(lp, "highs", None, 1e-9, None, False)
    assert unpresolved.status == "Optimal"
    solved = solve(lp, "highs")
    assert solved.objective == pytest.approx(unpresolved.objective, abs=1e-9)
    assert max(_residuals(lp, solved.primal).values()) <= 1e-9
    assert lp.objective @ solved.primal + lp.constant == pytest.approx(unpresolved.objective, abs=1e-9)
    assert matrix_bound(lp, solved.duals) == pytest.approx(unpresolved.objective, rel=1e-6, abs=1e-6)
    # The eliminated colours follow their single edge.
    colour_of = lp.num_free + lp.num_priced + lp.priced_colour[presolve.edges]
    assert np.array_equal(solved.primal[colour_of], solved.primal[lp.num_free + presolve.edges])


def test_presolve_removes_the_single_edge_colours_of_a_real_lp():
    graph = TokenisationGraph(excerpt_counts(4000))
    lp = graph.linear_program(48)
    presolve = SingleEdgeColours(lp)
    per_colour = np.bincount(lp.priced_colour, minlength=lp.num_colours)
    single = int((per_colour == 1).sum())
    assert single > lp.num_colours // 3
    assert presolve.lp.shape == (lp.shape[0] - single, lp.shape[1] - single)
    # compress then expand keeps every kept entry and fills the eliminated ones consistently.
    rng = np.random.default_rng(0)
    for scale in (0.1, 1.0, 30.0):
        primal, duals = rng.random(lp.shape[1]), rng.normal(0, scale, lp.shape[0])
        small = presolve.compress(primal, duals)
        back_primal, back_duals = presolve.expand(*small)
        assert np.array_equal(back_primal[presolve.keep_columns], primal[presolve.keep_columns])
        assert np.array_equal(back_duals[presolve.keep_rows], duals[presolve.keep_rows])
        colours = lp.num_free + lp.num_priced + lp.priced_colour[presolve.edges]
        assert np.array_equal(back_primal[colours], back_primal[lp.num_free + presolve.edges])
        # Any duals of the presolved LP certify the same bound on the original once expanded.
        assert matrix_bound(lp, back_duals) == pytest.approx(matrix_bound(presolve.lp, small[1]), rel=1e-8)  # up to the rounding margin
    # At the optimum the eliminated colours are priced at their full saving, never below the
    # budget's dual: a useful colour is not priced at 0 just because the budget is slack.
    solved = solve(lp, "highs")
    prices = -solved.duals[lp.num_flow_rows + presolve.edges]
    assert np.all(prices >= -solved.duals[-1] - 1e-9)
    assert np.all(prices >= -1e-9)
