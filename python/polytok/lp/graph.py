"""The tokenisation graph of a counted corpus and its LP relaxation (ConvexTok, sections 3.2-3.3).

`TokenisationGraph` wraps the Rust graph of *all* token edges (the graph the bound covers);
`TokenisationGraph.linear_program` assembles, as `scipy.sparse`, the *reduced* LP over a set of
candidate colours. Rust emits the flat edge arrays; nothing here loops per edge or per pre-token.

Reductions (done in Rust, `src/lp/graph.rs`), each exact for the LP over the candidate colours:
- a position that no candidate edge jumps over cuts a pre-token into independent segments;
- identical segments share one graph, so they merge and their counts add;
- one-byte segments (and one-byte pre-tokens) have a single path: a constant count;
- nodes where no candidate edge starts or ends lie on byte chains, which contract into one free
  edge costing (bytes) x count.
Dropping non-candidate colours (`min_frequency`) or capping length (`max_token_bytes`) is a
*restriction*, not a reduction: its optimum is not a bound for vocabularies that use the dropped
tokens. `polytok.lp.bound.certify_on_full_graph` turns its duals into a bound on the full graph.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse

from polytok import _core
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError


@dataclass
class LinearProgram:
    """min objective·x + constant  s.t.  row_lower <= matrix x <= row_upper,  0 <= x <= 1.

    Columns: free edges, then priced edges, then colours. Rows: flow conservation for every
    node but the sources (equalities), then p_e - c_colour(e) <= 0 per priced edge, then the
    budget sum(c) <= K."""

    objective: np.ndarray
    matrix: scipy.sparse.csr_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    constant: float
    budget: int
    num_free: int
    num_priced: int
    num_flow_rows: int
    colours: np.ndarray
    """Full-graph colour id of each LP colour column."""
    priced_colour: np.ndarray
    """LP colour (0-based, among the colour columns) of each priced edge."""
    num_segments: int
    build: int = 0
    """Which reduced LP of its graph this is: the graph maps full edges to the latest only."""
    edge_tail: np.ndarray | None = field(default=None, repr=False)
    """Tail node of each edge column (free, then priced); a segment's nodes are consecutive."""
    edge_head: np.ndarray | None = field(default=None, repr=False)
    node_row: np.ndarray | None = field(default=None, repr=False)
    """Flow row of each node, -1 for the segment sources (they have none)."""

    @property
    def num_colours(self) -> int:
        return len(self.colours)

    @property
    def shape(self) -> tuple[int, int]:
        return self.matrix.shape

    @property
    def priced_columns(self) -> slice:
        return slice(self.num_free, self.num_free + self.num_priced)

    @property
    def colour_columns(self) -> slice:
        return slice(self.num_free + self.num_priced, self.matrix.shape[1])

    @property
    def capacity_rows(self) -> slice:
        return slice(self.num_flow_rows, self.num_flow_rows + self.num_priced)

    def size(self) -> dict[str, int]:
        """Variables, constraints and non-zeros, for reports."""
        rows, columns = self.matrix.shape
        return {
            "segments": self.num_segments,
            "variables": columns,
            "constraints": rows,
            "nonzeros": int(self.matrix.nnz),
            "free_edges": self.num_free,
            "priced_edges": self.num_priced,
            "colours": self.num_colours,
        }


class TokenisationGraph:
    """The full tokenisation graph of `counts`: every substring of 2..max_token_bytes bytes of a
    pre-token is a colour. Bounds computed on it cover every vocabulary of K tokens (of at most
    max_token_bytes bytes, when set) that never crosses a pre-token."""

    def __init__(self, counts: PreTokenCounts, max_token_bytes: int | None = None):
        if max_token_bytes is not None and max_token_bytes < 2:
            raise ConfigError(f"max_token_bytes must be at least 2 or None, got {max_token_bytes}")
        self.counts = counts
        self.max_token_bytes = max_token_bytes
        self.core = _core.TokenGraph(counts.data, counts.offsets, counts.counts, max_token_bytes or 0)
        self.lp_colours: np.ndarray | None = None
        """Full-graph colours of the last reduced LP built (the Rust side maps its edges)."""
        self.builds = 0
        self.fixed: np.ndarray | None = None
        """Per colour, whether every vocabulary the bound covers holds it (`fix_colours`)."""

    def fix_colours(self, tokens: list[bytes]) -> np.ndarray:
        """Fixes the colours whose bytes are among `tokens` (an extension's base): the dual
        ascent leaves their edges unpriced and their colours outside the budget, so its bound
        covers every vocabulary of these tokens plus K more. Returns the flag per colour."""
        self.fixed = self.core.fix_colours([bytes(token) for token in tokens])
        return self.fixed

    @property
    def num_colours(self) -> int:
        return self.core.num_colours

    # NumPy copies of the core's arrays, made on first use: the dual solver never asks for them,
    # and at the paper's scale they are gigabytes.
    @functools.cached_property
    def edge_colours(self) -> np.ndarray:
        """The colour of every edge (uint32)."""
        return self.core.edge_colours()

    @functools.cached_property
    def colour_frequencies(self) -> np.ndarray:
        """The weighted frequency of every colour (uint64)."""
        return self.core.colour_frequencies()

    @functools.cached_property
    def colour_lengths(self) -> np.ndarray:
        """The length in bytes of every colour (uint32)."""
        return self.core.colour_lengths()

    @property
    def num_edges(self) -> int:
        return self.core.num_edges

    def covers(self, budget: int) -> str:
        """The set of vocabularies a bound on this graph holds for, in words."""
        length = f" of at most {self.max_token_bytes} bytes" if self.max_token_bytes else ""
        return (
            f"every vocabulary of the 256 single bytes plus at most {budget} tokens{length} "
            "that never crosses a pre-token, on this counted corpus"
        )

    def certificate_covers(self, budget: int) -> str:
        """What a certificate from this graph covers: every vocabulary, also on a capped graph,
        whose certificates price the longer substrings on the fly (`polytok.lp.bound.lagrangian`)."""
        sentence = (f"every vocabulary of the 256 single bytes plus at most {budget} tokens that never crosses a "
                    "pre-token, on this counted corpus")
        if self.max_token_bytes is None:
            return sentence
        return sentence + f" (solved over tokens of at most {self.max_token_bytes} bytes, longer ones priced on the fly)"

    def colour_bytes(self, colours: np.ndarray) -> list[bytes]:
        return self.core.colour_bytes([int(c) for c in colours])

    def linear_program(self, budget: int, min_frequency: int = 1) -> LinearProgram:
        """The reduced LP over the colours of weighted frequency >= min_frequency."""
        return self.linear_program_over(budget, self.colour_frequencies >= max(1, min_frequency))

    def linear_program_over(self, budget: int, candidate: np.ndarray) -> LinearProgram:
        """The reduced LP over the colours flagged in `candidate` (bool per colour)."""
        if budget < 0:
            raise ConfigError(f"the budget K must be >= 0, got {budget}")
        arrays = self.core.reduced_lp(np.ascontiguousarray(candidate, dtype=bool))
        self.lp_colours = arrays["lp_colours"].astype(np.int64)
        self.builds += 1
        lp = assemble(arrays, budget)
        lp.build = self.builds
        return lp


def assemble(arrays: dict, budget: int) -> LinearProgram:
    """Builds the sparse LP from the flat arrays of `TokenGraph.reduced_lp`."""
    supply = arrays["node_supply"]
    num_free = len(arrays["free_cost"])
    num_priced = len(arrays["priced_cost"])
    num_colours = len(arrays["lp_colours"])
    num_columns = num_free + num_priced + num_colours
    # One flow row per node except the segment sources (their rows are implied by the others).
    flow_row = np.full(len(supply), -1, dtype=np.int64)
    keep = supply != -1.0
    flow_row[keep] = np.arange(int(keep.sum()))
    num_flow_rows = int(keep.sum())

    tails = np.concatenate([arrays["free_tail"], arrays["priced_tail"]]).astype(np.int64)
    heads = np.concatenate([arrays["free_head"], arrays["priced_head"]]).astype(np.int64)
    edge_columns = np.arange(num_free + num_priced, dtype=np.int64)
    # Flow conservation: +1 where an edge enters a node, -1 where it leaves.
    into, out_of = flow_row[heads], flow_row[tails]
    enter, leave = into >= 0, out_of >= 0
    priced_columns = num_free + np.arange(num_priced, dtype=np.int64)
    colour_columns = num_free + num_priced + arrays["priced_colour"].astype(np.int64)
    capacity_rows = num_flow_rows + np.arange(num_priced, dtype=np.int64)
    budget_row = num_flow_rows + num_priced
    rows = np.concatenate([
        into[enter], out_of[leave], capacity_rows, capacity_rows,
        np.full(num_colours, budget_row, dtype=np.int64),
    ])
    columns = np.concatenate([
        edge_columns[enter], edge_columns[leave], priced_columns, colour_columns,
        num_free + num_priced + np.arange(num_colours, dtype=np.int64),
    ])
    values = np.concatenate([
        np.ones(int(enter.sum())), -np.ones(int(leave.sum())), np.ones(num_priced),
        -np.ones(num_priced), np.ones(num_colours),
    ])
    matrix = scipy.sparse.csr_matrix(
        (values, (rows, columns)), shape=(budget_row + 1, num_columns)
    )
    flow_rhs = supply[keep].astype(np.float64)
    row_lower = np.concatenate([flow_rhs, np.full(num_priced + 1, -np.inf)])
    row_upper = np.concatenate([flow_rhs, np.zeros(num_priced), [float(budget)]])
    objective = np.concatenate([arrays["free_cost"], arrays["priced_cost"], np.zeros(num_colours)])
    return LinearProgram(
        objective=objective,
        matrix=matrix,
        row_lower=row_lower,
        row_upper=row_upper,
        constant=float(arrays["constant"]),
        budget=int(budget),
        num_free=num_free,
        num_priced=num_priced,
        num_flow_rows=num_flow_rows,
        colours=arrays["lp_colours"].astype(np.int64),
        priced_colour=arrays["priced_colour"].astype(np.int64),
        num_segments=len(arrays["segment_weight"]),
        edge_tail=tails,
        edge_head=heads,
        node_row=flow_row,
    )
