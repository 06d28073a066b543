"""How much memory a ConvexTok solve or a certification needs, estimated from the counts before
any graph is built, and the check that stops a run the machine cannot hold with a clear error
instead of letting the kernel kill it.

The tokenisation graph has one edge per substring of two or more bytes of every unique
pre-token: L (L - 1) / 2 for a pre-token of L bytes (fewer with `max_token_bytes`), so the edge
count is known from the counts' offsets alone. The number of colours (distinct substrings) and
of edges the dual solver prices on their own at each budget (it ties the others to the budget
price, so they cost no L-BFGS vectors: `polytok.lp.dual.own_price_colours`) are counted by a
census (`_core.substring_census`: a hash per edge, sorted, at 16 bytes an edge), or bounded:
every edge its own colour and a variable, but at most 65,536 two-byte colours. `guard` tries the instant bound first and counts only when it does not
fit. The per-edge and per-colour costs below are read off the code (the arrays each stage holds
at its peak) and checked against measured peak memory (`tests/lp/test_memory.py`, and
`benchmarks/bench_scale.py --certify` at larger sizes).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from polytok import _core, checks
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, Error
from polytok.lp.dual import TIE_FRACTION
from polytok.lp.graph import TokenisationGraph

GRAPH_EDGE = 4
"""The graph's colour of each edge (Rust, u32, reserved exactly)."""
GRAPH_PRE_TOKEN = 24
"""The graph's offsets, counts and first edge per pre-token (Rust)."""
GRAPH_COLOUR = 20
"""The graph's colour arrays (first occurrence, length, frequency), per colour once built; while
it is built, per slot of their capacity (the next power of two above the colours: they grow by
doubling)."""
HASH_SLOT = 25
"""The substring-to-colour hash map while the graph is built, per bucket (a power of two at
load 7/8; at its last resize the old table, half the size, is still held): freed after."""
PYTHON_EDGE = 4
"""NumPy's copy of the edge colours (made for the LP solvers only)."""
PYTHON_COLOUR = 12
"""NumPy's copies of the colour frequencies and lengths (the LP solvers only)."""
DUAL_EDGE = 12
"""The dual solver per edge, for as long as it lives: marginals, prices and the tied weight
n_w / F_t (0 on edges with prices of their own), each in f32."""
DUAL_VARIABLE = 24
"""The dual solver per edge with a price of its own (a variable), for as long as it lives: its
index, colour, point and best point."""
DUAL_STAGE = 82
"""An L-BFGS stage per variable, beyond DUAL_VARIABLE less the point it replaces: three vectors
in f64 and three in f32, five curvature pairs in f32, and the state of its colour (totals,
values and temperature of a colour of at least two variables: 28 bytes, at most 14 a
variable)."""
DUAL_START_COLOUR = 30
"""Per colour while the dual solver starts: which colours are priced on their own (the
frequencies, savings and flags in NumPy, then the edge counts and shared indices in Rust)."""
DUAL_END_EDGE = 12
"""Per edge as the dual solver ends: the best prices in f32, then widened to f64."""
DUAL_END_COLOUR = 16
"""Per colour as the dual solver ends: its colour values, and NumPy's clipped copy."""
CERTIFY_EDGE = 32
"""Certification per edge: prices, the best prices, the next step's prices (the core computes
the subgradient edge by edge) and two sets of path marks."""
CERTIFY_COLOUR = 32
"""Certification per colour: two sets of colour totals and the top-K selection."""
CENSUS_EDGE = 16
"""The census (`_core.substring_census`) per edge: a 64-bit key, its pre-token and length,
sorted in place."""
CENSUS_COLOUR = 28
"""The census per colour: frequency, saving, edges, and one budget's copy of the frequencies."""
PRE_TOKEN = 400
"""Per unique pre-token: the solver's plans (Rust), and the Python objects of the encoder's
token count in `certify`."""
LP_EDGE = 1200
"""An LP solver per priced edge of the reduced LP: about six non-zeros (flow, capacity, budget),
each held by SciPy's and the solver's copies of the matrix at some 200 bytes (PDLP measured
134-165 bytes per non-zero), and the solver's iterates."""
BASE = 32 << 20
"""Thread stacks and small arrays."""
SLACK = 1.15
"""Allocator slack on everything else: freed blocks the allocator keeps, fragmentation (at
16 MB of text the model without it came within 1% of the measured peak)."""


class MemoryLimitError(Error):
    """A run would need more memory than the machine (or `memory_limit`) allows."""


@dataclass(frozen=True)
class MemoryEstimate:
    """An upper estimate of a run's peak memory beyond what the process already holds."""

    bytes: int
    edges: int
    colours: int
    """The graph's colours (counted by the census, or an upper bound on them)."""
    single_edge_colours: int
    pre_tokens: int
    max_token_bytes: int | None
    counted: bool
    """Whether the census counted the colours (else they are bounded)."""


def graph_edges(counts: PreTokenCounts, max_token_bytes: int | None = None) -> int:
    """The number of token edges of the tokenisation graph of `counts` (substrings of 2 to
    `max_token_bytes` bytes of every unique pre-token), computed from the lengths alone."""
    lengths = np.diff(np.asarray(counts.offsets, dtype=np.int64))
    return int(np.sum(_edges_per_pre_token(lengths, max_token_bytes)))


def _edges_per_pre_token(lengths: np.ndarray, cap: int | None) -> np.ndarray:
    """Edges of a pre-token of each length: sum over start positions of min(L - i, cap) - 1."""
    full = lengths * (lengths - 1) // 2
    if cap is None:
        return full
    capped = cap * (cap - 1) // 2 + (lengths - cap) * (cap - 1)
    return np.where(lengths <= cap, full, capped)


def colour_bound(counts: PreTokenCounts, max_token_bytes: int | None = None) -> int:
    """An upper bound on the graph's colours: one per edge, but at most 65,536 of two bytes."""
    lengths = np.diff(np.asarray(counts.offsets, dtype=np.int64))
    two_byte = int(np.sum(np.maximum(lengths - 1, 0)))
    return graph_edges(counts, max_token_bytes) - two_byte + min(two_byte, 1 << 16)


def estimate(counts: PreTokenCounts, solver: str, max_token_bytes: int | None = None, *,
             census: bool = True, budgets: Sequence[int] = ()) -> MemoryEstimate:
    """The peak memory of building the graph of `counts` (edges of at most `max_token_bytes`),
    solving with `solver` ("dual", or an LP solver: the graph and the certification only; each
    reduced LP is checked before it is built, `check_lp`) at each of `budgets`, and certifying.
    With `census`, the colours are counted (`_core.substring_census`, 16 bytes an edge for a
    moment), and with budgets also the edges the dual solver prices on their own; without, the
    colour bound stands in and every edge counts as a variable (larger, and instant)."""
    edges = graph_edges(counts, max_token_bytes)
    if census:
        _, colours, single, free_edges = _core.substring_census(
            counts.data, counts.offsets, counts.counts, max_token_bytes or 0, [int(b) for b in budgets], TIE_FRACTION)
        free = max(free_edges) if budgets else edges - single
    else:
        colours, single = colour_bound(counts, max_token_bytes), 0
        free = edges
    pre_tokens = len(counts)
    capacity = _next_power_of_two(colours)
    graph = len(counts.data) + GRAPH_PRE_TOKEN * pre_tokens + GRAPH_EDGE * edges + GRAPH_COLOUR * capacity
    build = graph + HASH_SLOT * _hash_buckets(colours) * 3 // 2
    built = graph - GRAPH_COLOUR * (capacity - colours)
    working = CERTIFY_EDGE * edges + CERTIFY_COLOUR * colours
    if solver == "dual":
        # No NumPy copies of the graph's arrays. Each budget's ascent is freed before its
        # prices are certified; it peaks at its start, in a stage, or at its end.
        held = built
        ascent = DUAL_EDGE * edges + DUAL_VARIABLE * free
        working = max(working, DUAL_START_COLOUR * colours + ascent,
                      ascent + max(DUAL_STAGE * free, DUAL_END_EDGE * edges + DUAL_END_COLOUR * colours))
    else:
        held = built + PYTHON_EDGE * edges + PYTHON_COLOUR * colours
    peak = max(CENSUS_EDGE * edges + CENSUS_COLOUR * colours if census else 0, build, held + working)
    total = BASE + SLACK * (peak + PRE_TOKEN * pre_tokens)
    return MemoryEstimate(int(total), edges, colours, single, pre_tokens, max_token_bytes, census)


def _next_power_of_two(count: int) -> int:
    """A vector's capacity after `count` pushes (Rust doubles from 4)."""
    return max(4, 1 << max(count - 1, 0).bit_length())


def _hash_buckets(count: int) -> int:
    """hashbrown's buckets for `count` entries: a power of two at most 7/8 full."""
    return 8 if count < 8 else _next_power_of_two(-(-count * 8 // 7))


def parse_size(value: int | str | None, name: str = "memory_limit") -> int | None:
    """Bytes from an int or a string such as '12G', '800M' or '1.5GiB' (powers of 1024)."""
    if value is None:
        return None
    if checks.is_integer(value):
        if value <= 0:
            raise ConfigError(f"{name} must be > 0 bytes, got {value}")
        return int(value)
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([kKmMgGtT]?)(i?[bB])?\s*", str(value))
    if not isinstance(value, str) or match is None:
        raise ConfigError(f"{name} must be a number of bytes or a size like '12G' or '800M', got {value!r}")
    size = float(match.group(1)) * 1024 ** " KMGT".index(match.group(2).upper() or " ")
    if size < 1:
        raise ConfigError(f"{name} must be at least one byte, got {value!r}")
    return int(size)


def available_memory() -> tuple[int, str]:
    """Bytes this process can still allocate, and where the figure comes from: the kernel's
    MemAvailable, lowered to the cgroup's limit where one is set."""
    available, source = None, "MemAvailable"
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    available = int(line.split()[1]) * 1024
    except OSError:
        pass
    if available is None:
        available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        source = "free physical pages"
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            used = int(handle.read().strip())
        if limit != "max" and int(limit) - used < available:
            available, source = int(limit) - used, "the cgroup's memory.max"
    except (OSError, ValueError):
        pass
    return max(int(available), 0), source


def gigabytes(size: int) -> str:
    """A byte count for people: '12.3 GB' (powers of 1024)."""
    return f"{size / 2**30:.1f} GB" if size >= 2**30 else f"{size / 2**20:.0f} MB"


def guard(
    counts: PreTokenCounts, solver: str, max_token_bytes: int | None, what: str, memory_limit: int | None,
    cap_option: bool, budgets: Sequence[int] = (),
) -> MemoryEstimate:
    """Raises MemoryLimitError, naming the estimate and the options that shrink it, when the run
    would need more than `memory_limit` (bytes) or, without one, the memory available now;
    returns the estimate otherwise. The instant upper estimate decides when it fits; else the
    census counts the colours (if its own 8 bytes an edge fit) for the precise one."""
    if memory_limit is None:
        limit, source = available_memory()
    else:
        limit, source = memory_limit, "memory_limit"
    needed = estimate(counts, solver, max_token_bytes, census=False)
    if needed.bytes <= limit:
        return needed
    if BASE + CENSUS_EDGE * needed.edges + CENSUS_COLOUR * needed.colours <= limit:
        needed = estimate(counts, solver, max_token_bytes, census=True, budgets=budgets)
        if needed.bytes <= limit:
            return needed
    options = []
    if solver != "dual":
        dual = estimate(counts, "dual", max_token_bytes, census=False)
        options.append(f"solver='dual' (no LP: at most {gigabytes(dual.bytes)})")
    if cap_option:
        cap = largest_cap_within(counts, solver, limit)
        if cap is not None:
            options.append(
                f"max_token_bytes={cap} (at most {gigabytes(estimate(counts, solver, cap, census=False).bytes)}: the "
                f"solve considers tokens of at most {cap} bytes; the bound still covers every vocabulary, a little "
                "weaker)"
            )
    options.append("a smaller corpus (fewer unique pre-tokens; long ones cost the most: "
                   "a pre-token of L bytes has L(L-1)/2 substring edges)")
    options.append("memory_limit (--memory-limit) to allow more than the figure above")
    counted = "" if needed.counted else "up to "
    raise MemoryLimitError(
        f"{what} would need about {gigabytes(needed.bytes)} of memory ({needed.edges:,} substring edges and "
        f"{counted}{needed.colours:,} colours of {needed.pre_tokens:,} unique pre-tokens), but "
        f"{gigabytes(limit)} is available ({source}). Options that shrink it: " + "; ".join(options) + "."
    )


def largest_cap_within(counts: PreTokenCounts, solver: str, limit: int) -> int | None:
    """The largest `max_token_bytes` (at least 2) whose estimate fits in `limit`, None if even
    two-byte tokens do not fit (the estimate grows with the cap)."""
    longest = int(np.max(np.diff(np.asarray(counts.offsets, dtype=np.int64)), initial=0))
    low, high = 2, max(longest, 2)
    # Without the census, an upper estimate: the cap it finds surely fits.
    if estimate(counts, solver, low, census=False).bytes > limit:
        return None
    while low < high:
        middle = (low + high + 1) // 2
        if estimate(counts, solver, middle, census=False).bytes <= limit:
            low = middle
        else:
            high = middle - 1
    return low


def check_lp(graph: TokenisationGraph, candidate: np.ndarray) -> None:
    """Before column generation builds a reduced LP over the `candidate` colours: refuses one
    whose upper estimate (LP_EDGE per edge of a candidate colour) exceeds the memory available
    now, with the graph already built."""
    priced = int(np.bincount(graph.edge_colours, minlength=graph.num_colours)[candidate].sum())
    needed = LP_EDGE * priced
    limit, source = available_memory()
    if needed > limit:
        raise MemoryLimitError(
            f"the reduced LP of up to {priced:,} priced edges would need about {gigabytes(needed)} more memory, "
            f"but {gigabytes(limit)} is available ({source}). Options that shrink it: solver='dual' (no LP), "
            "fewer initial_colours, a higher min_frequency, max_token_bytes, or a smaller corpus."
        )
