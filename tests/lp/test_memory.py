"""Never killed without a word: the peak-memory estimate (edge and colour counts, an upper bound
on a measured peak), the error a run that would not fit stops with, and runs stopped by a time
limit or Ctrl-C that still end with a valid bound that says it is weaker."""
import _thread
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import polytok
from polytok.certify import Certificate, certify, stopped_early
from polytok.lp import dual, memory
from polytok.lp.bound import lagrangian
from polytok.lp.dual import dual_ascent
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import relax
from polytok.lp.solvers import solve
from test_bound import excerpt_counts, random_counts

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("cap", [None, 2, 3, 5])
def test_edge_count_and_colour_bound_from_the_lengths_alone(seed, cap):
    counts = random_counts(seed)
    graph = TokenisationGraph(counts, max_token_bytes=cap)
    assert memory.graph_edges(counts, cap) == graph.num_edges
    assert memory.colour_bound(counts, cap) >= graph.num_colours


def test_colour_bound_on_text():
    counts = excerpt_counts(4000)
    graph = TokenisationGraph(counts)
    assert memory.graph_edges(counts) == graph.num_edges
    assert graph.num_colours <= memory.colour_bound(counts) <= graph.num_edges


def test_sizes_parse_and_bad_ones_are_refused():
    assert memory.parse_size("12G") == 12 << 30
    assert memory.parse_size("800M") == 800 << 20
    assert memory.parse_size("1.5GiB") == 3 << 29
    assert memory.parse_size(4096) == 4096
    assert memory.parse_size(None) is None
    for bad in ("twelve", "-3G", 0, "0.1", True):
        with pytest.raises(polytok.Error, match="memory_limit"):
            memory.parse_size(bad)


def test_a_run_that_does_not_fit_stops_with_the_estimate_and_the_options():
    counts = excerpt_counts(3000)
    tokenizer = polytok.train(counts, vocab_size=256 + 30, progress=False)
    needed = memory.estimate(counts, "dual", budgets=[30])
    with pytest.raises(memory.MemoryLimitError) as error:
        certify(tokenizer, counts, solver="dual", memory_limit=needed.bytes - 1)
    message = str(error.value)
    assert isinstance(error.value, polytok.Error)
    assert f"{needed.edges:,} substring edges" in message and "memory_limit" in message
    assert "max_token_bytes=" in message and "a smaller corpus" in message
    # The cap it proposes fits the limit, and then the certificate says what it covers.
    cap = int(message.split("max_token_bytes=")[1].split(" ")[0])
    assert memory.estimate(counts, "dual", cap, budgets=[30]).bytes <= needed.bytes - 1
    capped = certify(tokenizer, counts, solver="dual", memory_limit=needed.bytes - 1, max_token_bytes=cap)
    assert f"of at most {cap} bytes" in capped.covers
    assert capped.bound <= capped.shortest_path_tokens
    # An LP solver's message names the dual solver too; training checks the same way.
    with pytest.raises(memory.MemoryLimitError, match="solver='dual'"):
        certify(tokenizer, counts, solver="highs", memory_limit="1M")
    with pytest.raises(memory.MemoryLimitError, match="ConvexTok training would need"):
        polytok.train(counts, algorithm="convex", vocab_size=256 + 30, solver="dual", memory_limit="1M",
                      progress=False)
    # Enough memory: the run goes ahead.
    assert certify(tokenizer, counts, solver="dual", memory_limit=needed.bytes).bound > 0


PEAK = """
import collections, sys
from polytok.counts import PreTokenCounts
from polytok.lp import memory
from polytok.lp.relax import relax
from polytok.lp.graph import TokenisationGraph
from polytok.pretokenize import PreTokenizer

def resident():
    with open("/proc/self/status") as handle:
        fields = dict(line.split(":", 1) for line in handle)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024

splitter, words = PreTokenizer("cl100k"), collections.Counter()
for name in sys.argv[1:]:
    words.update(splitter.split(open(f"tests/data/{name}", encoding="utf-8").read()))
counts = PreTokenCounts.from_dict(words, "cl100k")
before, _ = resident()
graph = TokenisationGraph(counts)
relaxation = relax(graph, 256, solver="dual", tolerance=1e-3)
relaxation.certify(upper_bound=float(counts.counts.sum()), steps=5)
_, peak = resident()
print(peak - before, memory.estimate(counts, "dual", budgets=[256]).bytes - memory.BASE, graph.num_edges)
"""


def test_the_estimate_is_above_the_measured_peak():
    """Measured in a fresh process: its peak resident memory above what it held before the
    graph, against the estimate without its fixed allowance (which only covers slack). Chinese
    text (long pre-tokens, most colours with one edge) and a mix of short ones."""
    for files in (["handbook-zh-CN.txt", "handbook-en-US.txt"],
                  ["handbook-en-US.txt", "handbook-es-ES.txt", "handbook-de-DE.txt", "handbook-fr-FR.txt", "kjv.txt",
                   "python-textwrap.py.txt"]):
        result = subprocess.run([sys.executable, "-c", PEAK, *files], capture_output=True, text=True, check=True,
                                cwd=REPOSITORY, env=dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path)))
        measured, estimated, edges = (int(value) for value in result.stdout.split())
        assert edges > 150_000, files
        assert measured <= estimated <= 2 * measured


def test_time_limit_ends_certify_with_a_valid_weaker_bound():
    counts = excerpt_counts(3000)
    tokenizer = polytok.train(counts, vocab_size=256 + 64, progress=False)
    optimum = solve(TokenisationGraph(counts).linear_program(64), "highs").objective
    stopped = certify(tokenizer, counts, solver="dual", time_limit=1e-3)
    assert stopped.status == "TIME_LIMIT" and stopped_early(stopped.status)
    assert 0 < stopped.bound <= optimum + 1e-6
    assert "stopped early" in stopped.summary()
    finished = certify(tokenizer, counts, solver="dual")
    assert not stopped_early(finished.status) and "stopped early" not in finished.summary()
    assert stopped.bound <= finished.bound <= optimum + 1e-6
    trained = polytok.train(counts, algorithm="convex", vocab_size=256 + 64, solver="dual", time_limit=1e-3,
                            progress=False)
    certificate = Certificate.from_dict(trained.certificate)
    assert certificate.status == "TIME_LIMIT" and certificate.bound <= certificate.tokens


def test_ctrl_c_in_the_ascent_ends_it_with_a_valid_bound(monkeypatch):
    """Ctrl-C (here `interrupt_main` from a timer that the first stage starts) inside a stage
    stops the ascent at its next step; the prices reached still certify. The timer fires 0.1 s
    into the first stage, which alone runs 1,145 steps (about 1 s), so the interrupt lands
    inside it; the stage's step count shows it did. Python's own SIGINT handler is installed
    for the test: a process started with SIGINT ignored (as a non-interactive shell starts its
    background jobs) gets nothing from `interrupt_main`."""
    graph = TokenisationGraph(excerpt_counts(6000))
    optimum = solve(graph.linear_program(64), "highs").objective
    timers: list[threading.Timer] = []
    real = dual._core.DualAscent

    class InterruptedInItsFirstStage:
        def __init__(self, *args):
            self.ascent = real(*args)

        def __getattr__(self, name):
            return getattr(self.ascent, name)

        def stage(self, *args, **kwargs):
            if not timers:
                timers.append(threading.Timer(0.1, _thread.interrupt_main))
                timers[0].start()
            return self.ascent.stage(*args, **kwargs)

    monkeypatch.setattr(dual._core, "DualAscent", InterruptedInItsFirstStage)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        solution, _, stages = dual_ascent(graph, 64, tolerance=1e-6, iterations=10**7, extend=0)
    finally:
        for timer in timers:
            timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert solution.status == "INTERRUPTED"
    assert len(stages) == 1 and 0 < stages[0]["iterations"] < 1000
    bound = lagrangian(graph, solution.duals, 64).bound
    assert np.isfinite(bound) and 0 < bound <= optimum + 1e-6


def test_column_generation_checks_each_reduced_lp_before_building_it(monkeypatch):
    graph = TokenisationGraph(excerpt_counts(2000))
    edges_of_all = graph.num_edges * memory.LP_EDGE
    monkeypatch.setattr(memory, "available_memory", lambda: (edges_of_all - 1, "a test"))
    with pytest.raises(memory.MemoryLimitError, match=r"reduced LP of up to [\d,]+ priced edges.*a test"):
        relax(graph, 32, solver="highs")
    # A first LP of fewer colours fits.
    assert relax(graph, 32, solver="highs", initial_colours=200, rounds=0).solution.status == "Optimal"
