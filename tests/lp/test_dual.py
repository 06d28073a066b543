"""The LP-free "dual" solver: smoothed shortest paths (value, gradient and limit), the ascent's
bound (valid, close to the simplex optimum, deterministic), and training and certification
with it."""
import itertools
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import polytok
from polytok.certify import Certificate
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.lp.bound import lagrangian
from polytok import _core
from polytok.lp import dual
from polytok.lp.dual import dual_ascent, temperatures
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import relax
from polytok.lp.solvers import solve
from test_bound import excerpt_counts, random_counts


def paths(length: int):
    """Every path of a pre-token of `length` bytes, as its list of (i, j) steps."""
    for cuts in itertools.product((0, 1), repeat=max(length - 1, 0)):
        points = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [length]
        yield list(zip(points, points[1:]))


def brute_force_soft(graph: TokenisationGraph, counts, prices: np.ndarray, tau: float):
    """sum_w n_w softmin_w, sum_w n_w min_w and the Gibbs edge marginals by enumerating paths."""
    soft = hard = 0.0
    marginals = np.zeros(graph.num_edges)
    edge = 0
    for word, count in counts:
        length = len(word)
        index = {}
        for i in range(length):
            for j in range(i + 2, length + 1):
                index[(i, j)] = edge
                edge += 1
        costs, used = [], []
        for path in paths(length):
            steps = [index.get(step) for step in path]
            costs.append(sum(1.0 + (prices[e] / count if e is not None else 0.0) for e in steps))
            used.append([e for e in steps if e is not None])
        shortest = min(costs)
        weights = [math.exp(-(c - shortest) / tau) for c in costs]
        total = sum(weights)
        soft += count * (shortest - tau * math.log(total))
        hard += count * shortest
        for weight, edges in zip(weights, used):
            for e in edges:
                marginals[e] += weight / total
    assert edge == graph.num_edges
    return soft, hard, marginals


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tau", [1.0, 0.05])
def test_soft_paths_match_enumeration(seed, tau):
    counts = random_counts(seed)
    graph = TokenisationGraph(counts)
    prices = np.random.default_rng(seed).random(graph.num_edges) * 3
    soft, hard, marginals = graph.core.soft_paths(prices, tau)
    want_soft, want_hard, want_marginals = brute_force_soft(graph, counts, prices, tau)
    assert soft == pytest.approx(want_soft, rel=1e-12)
    assert hard == pytest.approx(want_hard, rel=1e-12)
    np.testing.assert_allclose(marginals, want_marginals, atol=1e-12)


@pytest.mark.parametrize("tau", [1.0, 0.05])
def test_soft_paths_in_lockstep_groups_match_enumeration(tau):
    """Pre-tokens of one length are evaluated four at a time: full groups, partial groups (three
    and one left over), one-byte pre-tokens, and lanes where some edges are negligible (prices
    far above the path) while the same edge in another lane is not."""
    rng = np.random.default_rng(7)
    words = {}
    for length, number in ((5, 11), (3, 4), (1, 2), (9, 1), (2, 6)):
        while sum(len(w) == length for w in words) < number:
            words[bytes(int(v) for v in rng.choice(list(b"abc"), length))] = int(rng.integers(1, 6))
    counts = PreTokenCounts.from_dict(words)
    graph = TokenisationGraph(counts)
    prices = rng.random(graph.num_edges) * 3
    prices[rng.random(graph.num_edges) < 0.3] *= 50
    soft, hard, marginals = graph.core.soft_paths(prices, tau)
    want_soft, want_hard, want_marginals = brute_force_soft(graph, counts, prices, tau)
    assert soft == pytest.approx(want_soft, rel=1e-12)
    assert hard == pytest.approx(want_hard, rel=1e-12)
    np.testing.assert_allclose(marginals, want_marginals, atol=1e-12)


def test_soft_paths_gradient_and_limit():
    graph = TokenisationGraph(excerpt_counts(1500))
    rng = np.random.default_rng(1)
    prices = rng.random(graph.num_edges) * 2
    hard, _ = graph.core.shortest_paths(prices)
    for tau in (0.3, 0.01):
        soft, same_hard, marginals = graph.core.soft_paths(prices, tau)
        assert same_hard == pytest.approx(hard, rel=1e-12)
        assert soft <= hard
        step = rng.standard_normal(graph.num_edges) * 1e-5
        moved, _, _ = graph.core.soft_paths(np.maximum(prices + step, 0.0), tau)
        assert moved - soft == pytest.approx(marginals @ (np.maximum(prices + step, 0.0) - prices), rel=1e-3)
    # At a tiny temperature the soft minimum is the hard one.
    assert graph.core.soft_paths(prices, 1e-7)[0] == pytest.approx(hard, rel=1e-6)
    with pytest.raises(ValueError, match="tau"):
        graph.core.soft_paths(prices, 0.0)
    with pytest.raises(ValueError, match="prices"):
        graph.core.soft_paths(-prices, 0.1)


@pytest.mark.parametrize("seed", range(10))
def test_dual_bound_is_valid_and_near_the_simplex_optimum(seed):
    graph = TokenisationGraph(random_counts(400 + seed))
    budget = 1 + seed % 3
    optimum = solve(graph.linear_program(budget), "highs").objective
    solution, colour_values, stages = dual_ascent(graph, budget, tolerance=1e-5)
    bound = lagrangian(graph, solution.duals, budget).bound
    assert bound <= optimum + 1e-9
    assert bound >= optimum * 0.99
    # The ascent evaluates prices rounded to f32 (the certificate evaluates those same prices);
    # its value and the certificate differ by that rounding, about 2^-24 of the prices.
    assert solution.objective == pytest.approx(bound, rel=1e-7)
    assert np.all((colour_values >= 0) & (colour_values <= 1))
    covered = budget >= sum(1 for word, _ in graph.counts if len(word) >= 2)
    assert [stage["temperature"] for stage in stages] == ([] if covered else temperatures(1e-5))


def test_dual_bound_on_text_within_half_a_percent_of_simplex():
    graph = TokenisationGraph(excerpt_counts(2500))
    for budget in (16, 96):
        optimum = solve(graph.linear_program(budget), "highs").objective
        relaxation = relax(graph, budget, solver="dual")
        assert relaxation.lp is None
        bound = relaxation.certify().bound
        assert optimum * 0.995 <= bound <= optimum + 1e-6
        # The prices certify alone: the certificate is the Lagrangian at them.
        assert bound == pytest.approx(lagrangian(graph, relaxation.solution.duals, budget).bound, rel=1e-12)


def test_a_budget_holding_every_pre_token_needs_no_ascent():
    counts = excerpt_counts(1500)
    graph = TokenisationGraph(counts)
    multi_byte = sum(1 for word, _ in counts if len(word) >= 2)
    solution, colour_values, stages = dual_ascent(graph, multi_byte)
    assert stages == [] and solution.status == "BUDGET_COVERS_EVERY_PRE_TOKEN"
    chosen = sorted(graph.colour_bytes(np.flatnonzero(colour_values)))
    assert chosen == sorted(word for word, _ in counts if len(word) >= 2)
    # One token per pre-token: the exact optimum, which the zero prices certify.
    assert lagrangian(graph, solution.duals, multi_byte).value == counts.counts.sum()
    assert solve(graph.linear_program(multi_byte), "highs").objective == pytest.approx(counts.counts.sum())
    # One token short of that, the ascent runs.
    assert dual_ascent(graph, multi_byte - 1, tolerance=1e-2)[2]


def test_a_cold_ascent_starts_with_lambda_at_its_scale(monkeypatch):
    graph = TokenisationGraph(excerpt_counts(1500))
    budget = 32
    optimum = solve(graph.linear_program(budget), "highs").objective

    def ascent(start):
        made = _core.DualAscent(graph.core, budget, dual.COLOUR_TAU_RATIO,
                                dual.own_price_colours(graph, budget, dual.TIE_FRACTION))
        assert made.budget_price == 0 and not made.prices(graph.core).any()
        made.start_budget_price(start)
        return made

    scale = dual.price_scale(graph, budget)
    started = ascent(0.5)
    assert started.budget_price == pytest.approx(0.5 * scale, rel=1e-12)
    # The free edges stay at 0; a tied edge is priced lambda n_w / F_t, so its colour's total
    # M_t is lambda. Only shared colours (priced on their own) are at 0.
    totals = graph.core.colour_totals(started.prices(graph.core))
    at_zero = np.isclose(totals, 0.0, atol=1e-9)
    np.testing.assert_allclose(totals[~at_zero], 0.5 * scale, rtol=1e-6)  # the prices are f32
    assert 0 < at_zero.sum() < len(totals) and started.variables > 1
    with pytest.raises(ValueError, match="start's budget price"):
        started.start_budget_price(-1.0)
    with pytest.raises(ValueError, match="start's budget price"):
        started.start_budget_price(float("nan"))
    # One step from there gives what the default's first stage gives with START_PRICE = 0.5, and
    # another start gives another value: the default ascent starts there.
    started.stage(graph.core, 1.0, 1, memory=5, seconds=None, extend=0, gain=1e-4)
    monkeypatch.setattr(dual, "START_PRICE", 0.5)
    solution, _, stages = dual_ascent(graph, budget, iterations=1, extend=0, tolerance=0.4)
    assert stages[0]["best_lagrangian"] == started.best_value
    other = ascent(0.0)
    other.stage(graph.core, 1.0, 1, memory=5, seconds=None, extend=0, gain=1e-4)
    assert other.best_value != started.best_value
    # The bound from that start is valid: the exact L at its prices, at most the LP optimum.
    assert lagrangian(graph, solution.duals, budget).bound <= optimum + 1e-6
    monkeypatch.undo()
    solution, _, _ = dual_ascent(graph, budget)
    assert optimum * 0.995 <= lagrangian(graph, solution.duals, budget).bound <= optimum + 1e-6


def test_temperature_schedule():
    assert temperatures(1e-4) == pytest.approx([1 / 2**k for k in range(12)])
    assert temperatures(0.1) == [1.0, 0.5]
    with pytest.raises(ConfigError, match="tolerance"):
        temperatures(0.0)


def test_time_limit_stops_and_still_certifies():
    graph = TokenisationGraph(excerpt_counts(3000))
    optimum = solve(graph.linear_program(64), "highs").objective
    solution, _, stages = dual_ascent(graph, 64, time_limit=1e-3)
    assert solution.status == "TIME_LIMIT"
    assert len(stages) <= 1
    assert lagrangian(graph, solution.duals, 64).bound <= optimum + 1e-6
    with pytest.raises(ConfigError, match="time_limit"):
        dual_ascent(graph, 64, time_limit=0)


def test_dual_options_are_checked():
    graph = TokenisationGraph(random_counts(3))
    with pytest.raises(ConfigError, match="min_frequency and max_token_bytes"):
        relax(graph, 2, solver="dual", min_frequency=3)
    with pytest.raises(ConfigError, match="min_frequency and max_token_bytes"):
        relax(graph, 2, solver="dual", max_token_bytes=4)
    with pytest.raises(ConfigError, match=r"unknown solver 'dul'; expected one of .*cuopt, dual"):
        relax(graph, 2, solver="dul")
    with pytest.raises(ConfigError, match="budget"):
        dual_ascent(graph, -1)
    with pytest.raises(ConfigError, match="iterations"):
        dual_ascent(graph, 2, iterations=0)
    with pytest.raises(ConfigError, match="extend"):
        dual_ascent(graph, 2, extend=-1)
    with pytest.raises(ConfigError, match="gain"):
        dual_ascent(graph, 2, gain=float("nan"))


def test_stages_run_on_while_the_bound_rises():
    graph = TokenisationGraph(excerpt_counts(3000))
    optimum = solve(graph.linear_program(64), "highs").objective
    base = dual_ascent(graph, 64, tolerance=1e-3, iterations=8, extend=0)
    assert [stage["iterations"] for stage in base[2]] == [8] * len(base[2])
    # By default a stage runs on while the bound rises by more than `tolerance` per 10 steps.
    default = dual_ascent(graph, 64, tolerance=1e-3, iterations=8)
    assert default[2][0]["iterations"] > 8
    assert default[2] == dual_ascent(graph, 64, tolerance=1e-3, iterations=8, extend=65, gain=1e-3)[2]
    # gain 0: on while the bound rises at all (early stages do), up to `extend` more steps.
    longer = dual_ascent(graph, 64, tolerance=1e-3, iterations=8, extend=30, gain=0.0)
    steps = [stage["iterations"] for stage in longer[2]]
    assert all(8 <= s <= 38 for s in steps) and steps[0] > 8
    assert lagrangian(graph, longer[0].duals, 64).bound <= optimum + 1e-6
    assert longer[0].objective >= base[0].objective
    # An unreachable gain never extends.
    never = dual_ascent(graph, 64, tolerance=1e-3, iterations=8, extend=30, gain=1.0)
    assert [stage["iterations"] for stage in never[2]] == [8] * len(never[2])
    assert never[0].objective == base[0].objective


REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DETERMINISM = """
import hashlib, sys
from polytok.lp.dual import dual_ascent
from polytok.lp.graph import TokenisationGraph
from tests.lp.test_bound import excerpt_counts
graph = TokenisationGraph(excerpt_counts(8000))
solution, values, stages = dual_ascent(graph, 48, tolerance=1e-3, extend=10, gain=1e-4)
# More variables than one chunk of the parallel L-BFGS vector work (8,192).
assert stages[-1]["variables"] > 2 * 8192, stages[-1]["variables"]
digest = hashlib.sha256(solution.duals.tobytes() + values.tobytes()).hexdigest()
sys.stdout.write(digest + repr(solution.objective) + repr([stage["iterations"] for stage in stages]))
"""


def test_dual_ascent_does_not_depend_on_the_thread_count():
    outputs = set()
    for threads in ("1", "2", "3"):
        env = dict(os.environ, RAYON_NUM_THREADS=threads)
        result = subprocess.run([sys.executable, "-c", DETERMINISM], env=env, capture_output=True, text=True,
                                check=True, cwd=REPOSITORY)
        outputs.add(result.stdout)
    assert len(outputs) == 1


def test_train_and_certify_with_the_dual_solver(tmp_path):
    documents = [open(f"tests/data/{name}", encoding="utf-8").read()[:3000]
                 for name in ("handbook-en-US.txt", "handbook-es-ES.txt", "python-textwrap.py.txt")]
    tokenizer = polytok.train(polytok.texts(documents), algorithm="convex", vocab_size=256 + 40, solver="dual", progress=False)
    certificate = Certificate.from_dict(tokenizer.certificate)
    assert certificate.solver == "dual"
    assert certificate.bound <= certificate.tokens
    assert tokenizer.training["rounds"][-1]["temperature"] == pytest.approx(temperatures(1e-4)[-1])
    tokenizer.save(tmp_path / "dual.json")
    again = polytok.load(tmp_path / "dual.json")
    assert Certificate.from_dict(again.certificate).bound == certificate.bound
    text = "".join(documents)
    assert again.decode(again.encode(text)) == text
    # Certifying the trained tokeniser on its own corpus with the dual solver: same bound or
    # better (subgradient steps towards its own count).
    checked = polytok.certify(tokenizer, polytok.texts(documents), solver="dual")
    assert checked.bound <= checked.shortest_path_tokens
    assert checked.shortest_path_tokens == certificate.tokens
