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

import inspect
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np

from polytok import checks
from polytok.counting import count
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, Error, FormatError
from polytok.lp import memory
from polytok.lp.bound import lagrangian, lagrangian_budgets, shortest_path_tokens, single_bytes
from polytok.lp.dual import dual_ascent
from polytok.lp.graph import TokenisationGraph
from polytok.lp.relax import check_relax_options, relax_budgets
from polytok.lp.rounding import check_rounding, round_colours
from polytok.tokenizer import Tokenizer


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
    base_tokens: int | None = None
    """For a bound over the extensions of a base (`certify(..., base=)`): the base's own count."""

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

        lines = [
            f"{'certified lower bound':>22}: {self.bound:,.1f} tokens",
            f"{'budget K':>22}: {self.budget:,}",
            f"{'covers':>22}: {self.covers}",
            line("this tokeniser", self.tokens, self.gap),
            line("its vocabulary, fewest", self.shortest_path_tokens, self.shortest_path_gap),
            *([] if self.base_tokens is None else [f"{'the base':>22}: {self.base_tokens:,} tokens"]),
            f"{'solver':>22}: {self.solver} ({self.status}), {self.seconds:.1f} s",
        ]
        if stopped_early(self.status):
            lines.append(f"{'note':>22}: the solve was stopped early; the bound is valid but weaker "
                         "than a finished solve's")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields, as stored in a tokeniser file."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Certificate":
        """Reads `to_dict` output back, checking every field."""
        if not isinstance(data, dict):
            raise FormatError(f"certificate: expected an object, got {type(data).__name__}")
        expected = {f for f in cls.__dataclass_fields__}
        missing, unknown = expected - data.keys() - {"base_tokens"}, data.keys() - expected
        if missing or unknown:
            raise FormatError(
                f"certificate: missing fields {sorted(missing)}, unknown fields {sorted(unknown)}"
            )
        kinds = {"bound": (int, float), "budget": int, "covers": str, "solver": str, "status": str,
                 "seconds": (int, float), "residuals": dict}
        for name, kind in kinds.items():
            if not isinstance(data[name], kind) or isinstance(data[name], bool):
                raise FormatError(f"certificate field {name!r}: expected {kind}, got {data[name]!r}")
        for name in ("tokens", "shortest_path_tokens", "base_tokens"):
            if data.get(name) is not None and (not isinstance(data[name], int) or data[name] < 0):
                raise FormatError(f"certificate field {name!r}: expected a count, got {data[name]!r}")
        for name in ("gap", "shortest_path_gap"):
            if data[name] is not None and not isinstance(data[name], (int, float)):
                raise FormatError(f"certificate field {name!r}: expected a number, got {data[name]!r}")
        return cls(**data)


def certify(
    tokenizer: Any,
    corpus: Any,
    *,
    budgets: Sequence[int] | None = None,
    solver: str = "auto",
    min_frequency: int = 1,
    initial_colours: int | str | None = "auto",
    rounds: int = 2,
    time_limit: float | None = None,
    tolerance: float = 1e-4,
    steps: int = 30,
    max_token_bytes: int | None = None,
    memory_limit: int | str | None = None,
    progress: bool = False,
    text_field: str = "text",
    text_column: str = "text",
    errors: str = "strict",
    base: Any = None,
) -> Certificate | list[Certificate]:
    """The certified bound for `tokenizer`'s budget on `corpus` (a PreTokenCounts, or anything
    `polytok.count` reads, with its reader options), its own token count and its shortest-path
    count, with gaps in %. The solve options are those of `polytok.lp.relax.relax`, checked
    before the corpus is counted; none of them can make the bound invalid, only weaker.

    With `budgets`, the tokeniser must be a BPE merge list: each budget K certifies its first K
    merges (their tokens, their merges encoder) in one run, and one Certificate per budget comes
    back, in the order given (see `certify_table`). `max_token_bytes` solves on the graph of
    tokens of at most that many bytes (far smaller when pre-tokens are long); the certificate
    still covers every vocabulary, pricing the longer substrings on the fly
    (`polytok.lp.bound.uncapped_bound`), at the cost of a somewhat weaker bound. The run's peak memory is estimated from the counts first
    (`polytok.lp.memory`); one that exceeds `memory_limit` (bytes, or e.g. "12G"; default: the
    memory available) stops with a MemoryLimitError naming the options that shrink it.
    `time_limit` or Ctrl-C during a solve ends it with a valid, weaker bound (the status says so).

    With `base` (a tokeniser that `tokenizer` extends, e.g. by `polytok.extend`), the bound covers
    every extension of the base by K tokens, K being the tokeniser's tokens that the base lacks:
    the base's tokens are in every vocabulary and cost no budget (solver "dual" only)."""
    if base is not None:
        if budgets is not None:
            raise ConfigError("certify with base= bounds one extension size; budgets= is not available with it")
        return _certify_extension(tokenizer, base, corpus, locals())
    if budgets is None:
        rows = _certify(tokenizer, corpus, None, (), locals())
        return rows[0].certificate
    return [row.certificate for row in _certify(tokenizer, corpus, budgets, (), locals())]


@dataclass
class BudgetRow:
    """One budget of `certify_table`: the certificate of the merge list's first K merges, and
    the shortest-path token count of each ConvexTok rounding of the same relaxation."""
    certificate: Certificate
    roundings: dict[str, int]

    def percentages(self) -> dict[str, float | None]:
        """Token counts as % of the bound (the paper's Table 2): the BPE prefix, then each rounding."""
        bound = self.certificate.bound

        def percent(count: int | None) -> float | None:
            return None if count is None or bound <= 0 else 100.0 * count / bound

        return {"BPE": percent(self.certificate.tokens),
                **{name.capitalize(): percent(count) for name, count in self.roundings.items()}}


def certify_table(
    tokenizer: Any,
    corpus: Any,
    budgets: Sequence[int],
    *,
    roundings: Sequence[str] = ("det", "bias", "int"),
    **options: Any,
) -> list[BudgetRow]:
    """`certify(tokenizer, corpus, budgets=...)` with, per budget, the shortest-path token count
    of each ConvexTok rounding (`polytok.lp.rounding.ROUNDINGS`, bar "price") of that
    budget's relaxation: the rows of the paper's Table 2. Takes `certify`'s options."""
    parameters = inspect.signature(certify).parameters
    unknown = sorted(name for name in options if name not in parameters or name in ("tokenizer", "corpus", "budgets"))
    if unknown:
        raise ConfigError(f"unknown option(s) {unknown} for certify_table")
    settings = {name: parameter.default for name, parameter in parameters.items()
                if parameter.default is not inspect.Parameter.empty}
    settings.update(options)
    return _certify(tokenizer, corpus, budgets, tuple(roundings), settings)


def _certify(tokenizer: Any, corpus: Any, budgets: Sequence[int] | None, roundings: tuple[str, ...],
             options: dict[str, Any]) -> list[BudgetRow]:
    """The one pipeline behind `certify` and `certify_table`."""
    start = time.perf_counter()
    solver = options["solver"]
    check_relax_options(solver=solver, min_frequency=options["min_frequency"], time_limit=options["time_limit"],
                        tolerance=options["tolerance"])
    for rounding in roundings:
        check_rounding(rounding)
        if rounding == "price":
            raise ConfigError('certify_table rounds the relaxation\'s colour values; "price" is not one of them')
    max_token_bytes = options["max_token_bytes"]
    if max_token_bytes is not None and (not isinstance(max_token_bytes, int) or max_token_bytes < 2):
        raise ConfigError(f"max_token_bytes must be an integer of at least 2 or None, got {max_token_bytes!r}")
    memory_limit = memory.parse_size(options["memory_limit"])
    entries = [(None, tokenizer)] if budgets is None else prefix_tokenizers(tokenizer, budgets)
    specials = list(getattr(tokenizer, "special_tokens", None) or [])
    if isinstance(corpus, PreTokenCounts):
        counts = corpus
    else:
        counts = count(corpus, pattern=tokenizer.pattern, special_tokens=specials, progress=options["progress"],
                       text_field=options["text_field"], text_column=options["text_column"],
                       errors=options["errors"])
    counts = _without(counts, {s.encode("utf-8") for s in specials})
    what = "certify" if budgets is None else f"certify at {len(entries)} budgets"
    vocabularies = [ordinary_vocabulary(entry) for _, entry in entries]
    sizes = [len({token for token in vocabulary if len(token) > 1}) for vocabulary in vocabularies]
    memory.guard(counts, solver, max_token_bytes, what, memory_limit, cap_option=True, budgets=sizes)
    path_tokens = [shortest_path_tokens(sorted(set(vocabulary).union(single_bytes())), counts)
                   for vocabulary in vocabularies]
    graph = TokenisationGraph(counts, max_token_bytes)
    order = sorted(range(len(entries)), key=lambda i: sizes[i])
    relax_options = {name: options[name] for name in ("solver", "min_frequency", "rounds", "time_limit",
                                                         "tolerance", "progress")}
    initial = options["initial_colours"]
    bounds = np.full(len(entries), -np.inf)
    solved: dict[int, tuple[str, str, dict[str, float], float, dict[str, int]]] = {}
    budget_list = [sizes[i] for i in order]
    relaxations = relax_budgets(graph, budget_list, initial_colours=initial, **relax_options)
    for i, relaxation in zip(order, relaxations):
        stopped = stopped_early(relaxation.solution.status)
        full = relaxation.certify(upper_bound=path_tokens[i], steps=0 if stopped else options["steps"])
        if graph.max_token_bytes is None:
            # Prices found for one budget bound every other: keep each budget's best over all
            # (on a capped graph each budget would cost its own pass over the long edges).
            bounds[order] = np.maximum(bounds[order], lagrangian_budgets(graph, full.prices, budget_list))
        bounds[i] = max(bounds[i], full.bound)
        del full  # its prices are not needed to round
        rounded = {}
        for rounding in roundings:
            chosen = round_colours(relaxation, rounding, sizes[i])
            rounded[rounding] = shortest_path_tokens(single_bytes() + graph.colour_bytes(chosen), counts)
        solution = relaxation.solution
        # Only what the certificate records: one budget's prices at a time, the next solve
        # allocates its own.
        solved[i] = (solution.solver, solution.status, solution.residuals, relaxation.seconds, rounded)
        del relaxation, solution
    # A bound for a budget bounds every smaller one (a vocabulary of fewer tokens is one of more).
    running = -np.inf
    for i in sorted(range(len(entries)), key=lambda i: -sizes[i]):
        running = bounds[i] = max(running, bounds[i])
    rows = []
    for i, (_, entry) in enumerate(entries):
        solver_name, status, residuals, seconds, rounded = solved[i]
        certificate = Certificate.from_counts(
            bound=float(bounds[i]), budget=sizes[i], covers=graph.certificate_covers(sizes[i]),
            tokens=encoder_tokens(entry, counts), shortest_path_tokens=path_tokens[i],
            solver=solver_name, status=status, residuals=residuals,
            seconds=seconds if budgets is not None else time.perf_counter() - start,
        )
        rows.append(BudgetRow(certificate, rounded))
    return rows


def _certify_extension(tokenizer: Any, base: Any, corpus: Any, options: dict[str, Any]) -> Certificate:
    """The bound over every extension of `base` by as many tokens as `tokenizer` adds to it."""
    start = time.perf_counter()
    if options["solver"] not in ("auto", "dual"):
        raise ConfigError(f"certify with base= runs the dual solver; solver={options['solver']!r} is not available")
    if options["max_token_bytes"] is not None:
        raise ConfigError("certify with base= prices every substring; max_token_bytes is not available with it")
    check_relax_options(solver="dual", min_frequency=options["min_frequency"], time_limit=options["time_limit"],
                        tolerance=options["tolerance"])
    pattern = getattr(base, "pattern", None)
    if getattr(tokenizer, "pattern", None) != pattern:
        raise ConfigError("the tokeniser and its base pre-tokenise differently; an extension keeps its base's pattern")
    base_tokens = {token for token in ordinary_vocabulary(base) if len(token) > 1}
    tokens = {token for token in ordinary_vocabulary(tokenizer) if len(token) > 1}
    if not base_tokens <= tokens:
        raise ConfigError(f"the tokeniser lacks {len(base_tokens - tokens)} of the base's tokens; it does not extend it")
    budget = len(tokens - base_tokens)
    specials = list(getattr(tokenizer, "special_tokens", None) or [])
    if isinstance(corpus, PreTokenCounts):
        counts = corpus
    else:
        counts = count(corpus, pattern=pattern, special_tokens=specials, progress=options["progress"],
                       text_field=options["text_field"], text_column=options["text_column"], errors=options["errors"])
    counts = _without(counts, {s.encode("utf-8") for s in specials})
    memory.guard(counts, "dual", None, "certify an extension", memory.parse_size(options["memory_limit"]),
                 cap_option=False, budgets=[budget])
    solve = solve_extension(counts, sorted(base_tokens), budget, tolerance=options["tolerance"],
                            time_limit=options["time_limit"], progress=options["progress"])
    solution = solve.solution
    return Certificate.from_counts(
        bound=solve.bound, budget=budget, covers=extension_covers(len(base_tokens), budget),
        tokens=encoder_tokens(tokenizer, counts),
        shortest_path_tokens=shortest_path_tokens(sorted(tokens.union(single_bytes())), counts),
        solver="dual", status=solution.status, residuals=solution.residuals,
        seconds=time.perf_counter() - start, base_tokens=encoder_tokens(base, counts),
    )


@dataclass
class ExtensionSolve:
    """The dual ascent over the extensions of a base: the graph with the base's colours fixed,
    the ascent's solution and colour values, its stage records, and the certified bound."""
    graph: TokenisationGraph
    solution: Any
    colour_values: np.ndarray
    stages: list[dict]
    bound: float


def solve_extension(counts: PreTokenCounts, base_tokens: list[bytes], budget: int, *, tolerance: float,
                    time_limit: float | None, progress: bool) -> ExtensionSolve:
    """Runs the dual ascent for every extension of `base_tokens` (multi-byte) by `budget` tokens on
    `counts`, and certifies its prices (zero on the base's edges, which the bound relies on)."""
    graph = TokenisationGraph(counts, None)
    graph.fix_colours(base_tokens)
    solution, colour_values, stages = dual_ascent(graph, budget, tolerance=tolerance, time_limit=time_limit,
                                                  progress=progress)
    prices = np.asarray(solution.duals, dtype=np.float64)
    prices[graph.fixed[graph.edge_colours]] = 0.0  # unpriced already
    return ExtensionSolve(graph, solution, colour_values, stages, float(lagrangian(graph, prices, budget).bound))


def extension_covers(base_tokens: int, budget: int) -> str:
    """What a bound over the extensions of a base with `base_tokens` multi-byte tokens covers."""
    return (f"every vocabulary of the base's {base_tokens + 256} tokens plus at most {budget} more that never "
            "crosses a pre-token, on this counted corpus, under any segmenter")


def stopped_early(status: str) -> bool:
    """Whether a solver status says the solve stopped before it finished (a time limit or
    Ctrl-C): its bound is still valid, only weaker."""
    squeezed = status.upper().replace("_", "").replace(" ", "")
    return "TIMELIMIT" in squeezed or squeezed == "INTERRUPTED"


def prefix_tokenizers(tokenizer: Any, budgets: Sequence[int]) -> list[tuple[int, Any]]:
    """(K, the BPE tokeniser of the first K merges of `tokenizer`) for each budget: the 256
    bytes, then the token each merge makes, encoding by replaying those merges."""
    merges = getattr(tokenizer, "merges", None)
    if not merges:
        raise ConfigError("budgets= certifies the prefixes of a BPE merge list, and this tokeniser has no merges")
    budgets = list(budgets)
    if not budgets:
        raise ConfigError("budgets must name at least one budget K")
    for budget in budgets:
        if not checks.is_integer(budget) or not 1 <= budget <= len(merges):
            raise ConfigError(f"each budget must be an integer from 1 to the {len(merges)} merges, got {budget!r}")
    vocabulary = ordinary_vocabulary(tokenizer)
    tokens = single_bytes()
    ids = {token: i for i, token in enumerate(tokens)}
    remapped, size_after = [], [len(tokens)]
    for index, (left, right) in enumerate(merges[: max(budgets)]):
        try:
            pair = (ids[vocabulary[left]], ids[vocabulary[right]])
        except (IndexError, KeyError):
            raise ConfigError(f"merge {index} ({left}, {right}) joins tokens that are neither bytes nor made by an "
                              "earlier merge; budgets= needs a byte-level BPE merge list") from None
        merged = vocabulary[left] + vocabulary[right]
        if merged not in ids:
            ids[merged] = len(tokens)
            tokens.append(merged)
        remapped.append(pair)
        size_after.append(len(tokens))
    return [(int(budget), Tokenizer(tokens[:size_after[budget]], segmenter="merges", pattern=tokenizer.pattern,
                                    merges=remapped[:budget], algorithm="bpe"))
            for budget in budgets]


def ordinary_vocabulary(tokenizer: Any) -> list[bytes]:
    """The bytes of every ordinary (non-special) token of a tokeniser."""
    special_ids = set(dict(getattr(tokenizer, "special_tokens", None) or {}).values())
    vocabulary = getattr(tokenizer, "vocab", None)
    if vocabulary is not None:
        return [bytes(token) for token in vocabulary if token]  # an empty entry is an unused id
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
