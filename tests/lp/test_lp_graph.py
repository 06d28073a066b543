"""The tokenisation graph and its reduced LP: colours, reductions, exact agreement with a naive
LP built straight from the paper's definition and solved by HiGHS."""
import collections
import random

import highspy
import numpy as np
import pytest
import scipy.sparse

from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.lp.graph import TokenisationGraph
from polytok.lp.solvers import solve

PAPER = PreTokenCounts.from_dict({w: 1 for w in [b"abc", b"abd", b"abe", b"bc", b"bd", b"be"]})


def naive_optimum(words: dict[bytes, int], budget: int, allowed=lambda token: True) -> float:
    """The LP of section 3.3 with one graph per pre-token occurrence class (no merging, no
    cutting, no contraction), every allowed substring of 2+ bytes a colour, solved by HiGHS."""
    colours: dict[bytes, int] = {}
    columns_cost, entries, rows_lower, rows_upper = [], [], [], []
    edges = []  # (column, colour or None)
    row = 0
    for word, count in words.items():
        length = len(word)
        node_row = {v: row + v - 1 for v in range(1, length + 1)}
        row += length
        for i in range(length):
            for j in range(i + 1, length + 1):
                token = word[i:j]
                if j > i + 1 and not allowed(token):
                    continue
                column = len(columns_cost)
                columns_cost.append(float(count))
                entries.append((node_row[j], column, 1.0))
                if i > 0:
                    entries.append((node_row[i], column, -1.0))
                colour = None
                if j > i + 1:
                    colour = colours.setdefault(token, len(colours))
                edges.append((column, colour))
        rows_lower += [0.0] * (length - 1) + [1.0]
        rows_upper += [0.0] * (length - 1) + [1.0]
    first_colour = len(columns_cost)
    columns_cost += [0.0] * len(colours)
    for column, colour in edges:
        if colour is not None:
            entries.append((row, column, 1.0))
            entries.append((row, first_colour + colour, -1.0))
            rows_lower.append(-highspy.kHighsInf)
            rows_upper.append(0.0)
            row += 1
    for colour in range(len(colours)):
        entries.append((row, first_colour + colour, 1.0))
    rows_lower.append(-highspy.kHighsInf)
    rows_upper.append(float(budget))
    row += 1
    r, c, v = zip(*entries)
    matrix = scipy.sparse.csc_matrix((v, (r, c)), shape=(row, len(columns_cost)))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = len(columns_cost), row
    lp.col_cost_ = np.array(columns_cost)
    lp.col_lower_, lp.col_upper_ = np.zeros(len(columns_cost)), np.ones(len(columns_cost))
    lp.row_lower_, lp.row_upper_ = np.array(rows_lower), np.array(rows_upper)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = matrix.indptr, matrix.indices, matrix.data
    highs = highspy.Highs()
    highs.setOptionValue("output_flag", False)
    highs.passModel(lp)
    highs.run()
    assert highs.modelStatusToString(highs.getModelStatus()) == "Optimal"
    return highs.getInfo().objective_function_value


def random_words(rng: random.Random, alphabet: bytes = b"abc") -> dict[bytes, int]:
    words = {}
    for _ in range(rng.randint(1, 7)):
        word = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        words[word] = rng.randint(1, 4)
    return words


def test_paper_example_graph_and_optimum():
    graph = TokenisationGraph(PAPER)
    assert graph.num_edges == 3 * 3 + 3 * 1
    assert sorted(graph.colour_bytes(np.arange(graph.num_colours))) == [
        b"ab", b"abc", b"abd", b"abe", b"bc", b"bd", b"be"]
    # "ab" occurs in three pre-tokens of count 1.
    frequencies = dict(zip(graph.colour_bytes(np.arange(graph.num_colours)), graph.colour_frequencies))
    assert frequencies[b"ab"] == 3 and frequencies[b"bc"] == 2
    lp = graph.linear_program(3)
    solution = solve(lp, "highs")
    # 15 bytes, saving 6 symbols: 9 tokens, and the LP is integral here.
    assert solution.objective == pytest.approx(9.0)
    assert naive_optimum(PAPER.to_dict(), 3) == pytest.approx(9.0)


@pytest.mark.parametrize("seed", range(25))
def test_reductions_preserve_the_lp_optimum(seed):
    rng = random.Random(seed)
    words = random_words(rng)
    counts = PreTokenCounts.from_dict(words)
    budget = rng.randint(0, 4)
    min_frequency = rng.choice([1, 1, 2, 3])
    graph = TokenisationGraph(counts)
    lp = graph.linear_program(budget, min_frequency)
    frequency = collections.Counter()
    for word, count in words.items():
        for i in range(len(word)):
            for j in range(i + 2, len(word) + 1):
                frequency[word[i:j]] += count
    expected = naive_optimum(words, budget, lambda token: frequency[token] >= min_frequency)
    assert solve(lp, "highs").objective == pytest.approx(expected, abs=1e-6)
    # Weighted frequencies are the sums of counts over occurrences.
    names = graph.colour_bytes(np.arange(graph.num_colours))
    assert dict(zip(names, graph.colour_frequencies.tolist())) == dict(frequency)


def test_merging_and_contraction_shrink_the_lp():
    # Only "ab" (frequency 11) survives the cut; "xab", "yab" and "zzab" then share the
    # segment "ab", whose graph merges, and the one-byte segments become constants.
    counts = PreTokenCounts.from_dict({b"xab": 5, b"yab": 5, b"zzab": 1})
    lp = TokenisationGraph(counts).linear_program(1, min_frequency=6)
    assert lp.num_segments == 1 and lp.num_colours == 1
    assert lp.constant == 5 + 5 + 2  # x, y and the two one-byte segments of "zzab"
    # The middle node of "ab" has only byte edges: one free edge of cost 2 x 11 remains.
    assert lp.num_free == 1 and lp.objective[0] == 22
    assert solve(lp, "highs").objective == pytest.approx(5 + 5 + 2 + 11)


def test_max_token_bytes_caps_colours():
    counts = PreTokenCounts.from_dict({b"abcdef": 2, b"abcd": 1})
    graph = TokenisationGraph(counts, max_token_bytes=3)
    assert graph.colour_lengths.max() == 3
    assert "of at most 3 bytes" in graph.covers(10)
    assert "of at most" not in TokenisationGraph(counts).covers(10)
    with pytest.raises(ConfigError):
        TokenisationGraph(counts, max_token_bytes=1)
    with pytest.raises(ConfigError):
        TokenisationGraph(counts).linear_program(-1)


def test_no_python_loop_needed_for_real_text():
    text = open("tests/data/handbook-en-US.txt", encoding="utf-8").read()[:5000]
    words = collections.Counter(text.split(" "))
    counts = PreTokenCounts.from_dict({w.encode(): c for w, c in words.items() if w})
    graph = TokenisationGraph(counts)
    lp = graph.linear_program(50, min_frequency=2)
    rows, columns = lp.shape
    assert columns == lp.num_free + lp.num_priced + lp.num_colours
    assert rows == lp.num_flow_rows + lp.num_priced + 1
    # Every flow row has an edge entering and one leaving except sink rows.
    assert lp.matrix.nnz == int(abs(lp.matrix).sum())
