"""The roundings' order: the first K of (score descending, weighted frequency descending, id)."""
import numpy as np
import pytest

from polytok.counts import PreTokenCounts
from polytok.lp.graph import TokenisationGraph
from polytok.lp.rounding import best_colours


@pytest.mark.parametrize("seed", range(12))
def test_best_colours_are_the_first_k_of_the_full_order(seed):
    rng = np.random.default_rng(seed)
    words = {bytes(rng.choice(list(b"abcd"), int(rng.integers(1, 7))).tolist()): int(rng.integers(1, 4))
             for _ in range(40)}
    graph = TokenisationGraph(PreTokenCounts.from_dict(words))
    # Few distinct scores, so that ties on the score and on the frequency are common.
    score = rng.integers(0, 4, graph.num_colours) / 4.0
    full = np.lexsort((np.arange(graph.num_colours), -graph.colour_frequencies.astype(np.float64), -score))
    for budget in (0, 1, 3, graph.num_colours // 2, graph.num_colours, graph.num_colours + 3):
        assert best_colours(graph, score, budget).tolist() == full[:budget].tolist()
        # With `positive` (Int): the first K of the order, less those of score 0.
        first = full[:budget]
        want = first[score[first] > 0].tolist()
        assert best_colours(graph, score, budget, positive=True).tolist() == want
