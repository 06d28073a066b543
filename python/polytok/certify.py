"""Certify any tokeniser: how far is its token count from the best any vocabulary of its size
could reach on a corpus?

The bound is a certified lower bound on the LP relaxation of the shortest-tokenisation problem
(polytok.lp) on the full tokenisation graph of the corpus, counted with the tokeniser's own
pre-tokenisation pattern. It covers every vocabulary of the 256 single bytes plus K tokens that
never crosses a pre-token, whatever its segmenter; K is the tokeniser's number of multi-byte
ordinary tokens. Because the bound is certified (from duals, never a solver's objective), every
tokeniser's count is at least 100% of it: the gaps reported are true optimality gaps.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from polytok.counts import PreTokenCounts, count
from polytok.errors import Error, FormatError
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import check_relax_options, default_initial_colours, relax


@dataclass
class Certificate:
    """A certified lower bound for a budget, and how a tokeniser compares with it."""

    bound: float
    budget: int
    covers: str
    tokens: int | None
    """The tokeniser's own token count on the corpus (its encoder)."""
    shortest_path_tokens: int | None
    """The count its vocabulary reaches with shortest-path (fewest tokens) segmentation."""
    gap: float | None
    """tokens / bound - 1, in percent."""
    shortest_path_gap: float | None
    """shortest_path_tokens / bound - 1, in percent."""
    solver: str
    status: str
    residuals: dict[str, float] = field(default_factory=dict)
    seconds: float = 0.0

    @classmethod
    def from_counts(cls, *, bound: float, tokens: int | None, shortest_path_tokens: int | None,
                    **fields: Any) -> "Certificate":
        """Fills in both gaps from the counts and the bound."""

        def gap(count: int | None) -> float | None:
            return None if count is None or bound <= 0 else 100.0 * (count / bound - 1.0)

        return cls(bound=bound, tokens=tokens, shortest_path_tokens=shortest_path_tokens,
                   gap=gap(tokens), shortest_path_gap=gap(shortest_path_tokens), **fields)

    def summary(self) -> str:
        """A few lines for people: the bound, what it covers, and both gaps."""

        def line(name: str, count: int | None, gap: float | None) -> str:
            return f"{name:>22}: " + ("-" if count is None else f"{count:,} tokens ({gap:+.2f}% over the bound)")

        return "\n".join([
            f"{'certified lower bound':>22}: {self.bound:,.1f} tokens",
            f"{'budget K':>22}: {self.budget:,}",
            f"{'covers':>22}: {self.covers}",
            line("this tokeniser", self.tokens, self.gap),
            line("its vocabulary, fewest", self.shortest_path_tokens, self.shortest_path_gap),
            f"{'solver':>22}: {self.solver} ({self.status}), {self.seconds:.1f} s",
        ])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, as stored in a tokeniser file."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Certificate":
        """Reads `to_dict` output back, checking every field."""
        if not isinstance(data, dict):
            raise FormatError(f"certificate: expected an object, got {type(data).__name__}")
        expected = {f for f in cls.__dataclass_fields__}
        missing, unknown = expected - data.keys(), data.keys() - expected
        if missing or unknown:
            raise FormatError(
                f"certificate: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}"
            )
        kinds = {"bound": (int, float), "budget": int, "covers": str, "solver": str, "status": str,
                 "seconds": (int, float), "residuals": dict}
        for name, kind in kinds.items():
            if not isinstance(data[name], kind) or isinstance(data[name], bool):
                raise FormatError(f"certificate field {name!r}: expected {kind}, got {data[name]!r}")
        for name in ("tokens", "shortest_path_tokens"):
            if data[name] is not None and (not isinstance(data[name], int) or data[name] < 0):
                raise FormatError(f"certificate field {name!r}: expected a count, got {data[name]!r}")
        for name in ("gap", "shortest_path_gap"):
            if data[name] is not None and not isinstance(data[name], (int, float)):
                raise FormatError(f"certificate field {name!r}: expected a number, got {data[name]!r}")
        return cls(**data)


def certify(
    tokenizer: Any,
    corpus: Any,
    *,
    solver: str = "auto",
    min_frequency: int = 1,
    initial_colours: int | str | None = "auto",
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    steps: int = 30,
    progress: bool = False,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
) -> Certificate:
    """The certified bound for `tokenizer`'s budget on `corpus` (a PreTokenCounts, or anything
    `polytok.count` reads, with its reader options), its own token count and its shortest-path
    count, with gaps in %. The solve options are those of `polytok.lp.relax.relax`, checked
    before the corpus is counted; none of them can make the bound invalid, only weaker."""
    start = time.perf_counter()
    check_relax_options(solver=solver, min_frequency=min_frequency, time_limit=time_limit, tolerance=tolerance)
    specials = list(getattr(tokenizer, "special_tokens", None) or [])
    if isinstance(corpus, PreTokenCounts):
        counts = corpus
    else:
        counts = count(corpus, pattern=tokenizer.pattern, special_tokens=specials, progress=progress,
                       text_field=text_field, text_column=text_column, errors=errors)
    counts = _without(counts, {s.encode("utf-8") for s in specials})
    vocabulary = ordinary_vocabulary(tokenizer)
    budget = len({token for token in vocabulary if len(token) > 1})
    path_tokens = shortest_path_tokens(sorted(set(vocabulary).union(single_bytes())), counts)
    graph = TokenisationGraph(counts)
    if initial_colours == "auto":
        initial_colours = default_initial_colours(budget)
    relaxation = relax(graph, budget, solver=solver, min_frequency=min_frequency,
                       initial_colours=initial_colours, rounds=rounds, time_limit=time_limit,
                       tolerance=tolerance, progress=progress)
    full = relaxation.certify(upper_bound=path_tokens, steps=steps)
    solution = relaxation.solution
    return Certificate.from_counts(
        bound=full.bound, budget=budget, covers=graph.covers(budget),
        tokens=encoder_tokens(tokenizer, counts), shortest_path_tokens=path_tokens,
        solver=solution.solver, status=solution.status, residuals=solution.residuals,
        seconds=time.perf_counter() - start,
    )


def ordinary_vocabulary(tokenizer: Any) -> list[bytes]:
    """The bytes of every ordinary (non-special) token of a tokeniser."""
    special_ids = set(dict(getattr(tokenizer, "special_tokens", None) or {}).values())
    vocabulary = getattr(tokenizer, "vocab", None)
    if vocabulary is not None:
        return [bytes(token) for token in vocabulary]
    return [tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size) if i not in special_ids]


def encoder_tokens(tokenizer: Any, counts: PreTokenCounts) -> int:
    """The tokeniser's own count: each unique pre-token encoded once by its encoder, times its
    count (equal to encoding the documents, as no segmenter crosses a pre-token)."""
    pieces = [piece for piece, _ in counts]
    lengths = np.zeros(len(pieces), dtype=np.uint64)
    texts, where = [], []
    for i, piece in enumerate(pieces):
        try:
            texts.append(piece.decode("utf-8"))
            where.append(i)
        except UnicodeDecodeError:
            try:
                lengths[i] = len(tokenizer.encode_ordinary(piece))
            except TypeError:
                raise Error(f"the tokeniser cannot encode the invalid UTF-8 pre-token {piece!r}") from None
    encode_batch = getattr(tokenizer, "encode_ordinary_batch", None) or getattr(tokenizer, "encode_batch")
    for i, ids in zip(where, encode_batch(texts)):
        lengths[i] = len(ids)
    return int(np.dot(lengths, counts.counts))


def _without(counts: PreTokenCounts, pieces: set[bytes]) -> PreTokenCounts:
    """`counts` without the given pre-tokens (special tokens are not the vocabulary's job)."""
    if not pieces:
        return counts
    return PreTokenCounts.from_dict({w: c for w, c in counts if w not in pieces}, counts.pattern)
