"""A solve on the graph capped at max_token_bytes, certified for every vocabulary: the longer
substrings are priced on the fly (never stored) so that none enters the top-K sum, which makes
the capped graph's bound the full graph's Lagrangian at explicit prices."""
import numpy as np
import pytest

import polytok
from polytok.certify import Certificate, certify
from polytok.lp.bound import RELATIVE_MARGIN, lagrangian, top_k
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import relax
from polytok.lp.solvers import solve
from test_bound import excerpt_counts, random_counts


def edges(counts, cap):
    """(pre-token index, i, j) of every edge, in the graph's order."""
    out = []
    for w, (word, _) in enumerate(counts):
        for i in range(len(word)):
            for j in range(i + 2, min(len(word), i + (cap or len(word))) + 1):
                out.append((w, i, j))
    return out


def explicit_full_prices(counts, cap, capped, prices, theta):
    """The full graph's prices that `uncapped_shortest_paths` stands for."""
    short = {edge: k for k, edge in enumerate(edges(counts, cap))}
    frequency = dict(zip(capped.colour_bytes(np.arange(capped.num_colours)), capped.colour_frequencies))
    words = [word for word, _ in counts]
    full = []
    for w, i, j in edges(counts, None):
        if j - i <= cap:
            full.append(prices[short[(w, i, j)]])
        else:
            fewest = min(frequency[words[w][a:a + cap]] for a in range(i, j - cap + 1))
            full.append(theta * counts.counts[w] * (1 - 1e-9) / fewest)
    return np.array(full)


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("cap", [2, 3])
def test_long_edges_priced_on_the_fly_are_the_full_graph_at_explicit_prices(seed, cap):
    counts = random_counts(seed)
    capped, full = TokenisationGraph(counts, max_token_bytes=cap), TokenisationGraph(counts)
    rng = np.random.default_rng(seed)
    prices = rng.random(capped.num_edges) * 4
    budget = 1 + seed % 4
    totals = np.bincount(capped.edge_colours, weights=prices, minlength=capped.num_colours)
    chosen = top_k(totals, budget)
    theta = float(totals[chosen[-1]]) if len(chosen) == budget else 0.0
    explicit = explicit_full_prices(counts, cap, capped, prices, theta)
    streamed = capped.core.uncapped_shortest_paths(prices, theta)
    assert streamed == pytest.approx(full.core.shortest_paths(explicit)[0], rel=1e-12)
    # No long colour's total reaches theta, so the top-K sums agree and so do the bounds.
    full_totals = np.bincount(full.edge_colours, weights=explicit, minlength=full.num_colours)
    long = full.colour_lengths > cap
    assert np.all(full_totals[long] <= theta)
    at_full = lagrangian(full, explicit, budget)
    at_capped = lagrangian(capped, prices, budget)
    assert at_capped.bound == pytest.approx(at_full.bound, rel=1e-9, abs=1e-9)
    assert at_capped.bound <= at_full.value
    # On an uncapped graph there are no long edges: the plain shortest paths.
    assert full.core.uncapped_shortest_paths(explicit, theta) == pytest.approx(full.core.shortest_paths(explicit)[0])


def test_capped_dual_solve_certifies_every_vocabulary():
    counts = excerpt_counts(3000)
    budget = 64
    optimum = solve(TokenisationGraph(counts).linear_program(budget), "highs").objective
    uncapped = relax(TokenisationGraph(counts), budget, solver="dual").certify().bound
    bounds = []
    for cap in (4, 8, 12):
        graph = TokenisationGraph(counts, max_token_bytes=cap)
        bounds.append(relax(graph, budget, solver="dual").certify().bound)
        assert bounds[-1] <= optimum * (1 + RELATIVE_MARGIN)
    # Weaker the shorter the cap (4.0% at 4 bytes, 0.13% at 8 here); once the cap passes the
    # lengths that pay (the longest pre-token here has 15 bytes), the uncapped bound itself.
    assert bounds[0] < bounds[1] < bounds[2]
    assert bounds[0] >= 0.95 * uncapped and bounds[1] >= 0.995 * uncapped
    assert bounds[2] == pytest.approx(uncapped, rel=1e-5)
    # certify and ConvexTok training take the cap the same way; the certificate says what it covers.
    tokenizer = polytok.train(counts, vocab_size=256 + budget, progress=False)
    certificate = certify(tokenizer, counts, solver="dual", max_token_bytes=8)
    assert "every vocabulary" in certificate.covers and "at most 8 bytes" in certificate.covers
    assert certificate.bound <= optimum * (1 + RELATIVE_MARGIN)
    trained = polytok.train(counts, algorithm="convex", vocab_size=256 + budget, solver="dual", max_token_bytes=6,
                            progress=False)
    assert max(len(token) for token in trained.vocab) <= 6
    record = Certificate.from_dict(trained.certificate)
    assert record.bound <= optimum * (1 + RELATIVE_MARGIN) and record.bound <= record.tokens
