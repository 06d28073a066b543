"""ConvexTok end to end: the paper's example, LP <= integer optimum <= every rounding, and
certification of a tokeniser that is not ConvexTok's own (a naive BPE)."""
import collections
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.certify import Certificate, certify
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, FormatError
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.lp.graph import TokenisationGraph
from polytok.lp.solvers import solve, solve_integer
from polytok.pretokenize import PreTokenizer
from polytok.trainers.convex import ROUNDINGS, fit_convex, train_convex

PAPER = {w: 1 for w in [b"abc", b"abd", b"abe", b"bc", b"bd", b"be"]}


class NaiveBpe:
    """Textbook byte-level BPE (most frequent pair, ties to the smallest pair of ids), with the
    duck-typed surface certify() reads: vocab, pattern, special_tokens, encode_batch."""

    def __init__(self, words: dict[bytes, int], merges: int, pattern: str | None = None):
        self.vocab = single_bytes()
        self.pattern = pattern
        self.special_tokens: dict[str, int] = {}
        self.merges: list[tuple[int, int]] = []
        pieces = {word: list(word) for word in words}
        for _ in range(merges):
            pairs = collections.Counter()
            for word, ids in pieces.items():
                for pair in zip(ids, ids[1:]):
                    pairs[pair] += words[word]
            if not pairs:
                break
            best = min(pairs, key=lambda pair: (-pairs[pair], pair))
            self.merges.append(best)
            self.vocab.append(self.vocab[best[0]] + self.vocab[best[1]])
            for word in pieces:
                pieces[word] = self._merge(pieces[word], best, len(self.vocab) - 1)

    @staticmethod
    def _merge(ids, pair, new):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def encode_piece(self, piece: bytes) -> list[int]:
        ids = list(piece)
        for rank, pair in enumerate(self.merges):
            ids = self._merge(ids, pair, 256 + rank)
        return ids

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        splitter = PreTokenizer(self.pattern)
        return [[i for piece in splitter.split(t) for i in self.encode_piece(piece)] for t in texts]


def test_paper_example_optimum_saves_six_and_bpe_five():
    counts = PreTokenCounts.from_dict(PAPER)
    fit = fit_convex(counts, 3, roundings=ROUNDINGS, solver="highs")
    assert fit.bound == pytest.approx(9.0, abs=1e-6) and fit.bound <= 9.0
    assert fit.tokens["det"] == 9  # optimal: saves 6 of 15 bytes (several vocabularies do)
    bpe = NaiveBpe(PAPER, 3)
    assert bpe.vocab[256] == b"ab"
    assert sum(len(bpe.encode_piece(w)) for w in PAPER) == 10
    certificate = certify(bpe, counts, solver="highs")
    assert certificate.tokens == 10 and certificate.budget == 3
    assert certificate.gap == pytest.approx(100 * (10 / certificate.bound - 1))
    assert certificate.shortest_path_tokens == 10  # {ab, abc, abd}-style vocab: no better cut


@pytest.mark.parametrize("seed", range(15))
def test_lp_below_integer_optimum_below_every_rounding(seed):
    rng = random.Random(seed)
    words = {}
    for _ in range(rng.randint(2, 8)):
        words[bytes(rng.choice(b"abc") for _ in range(rng.randint(1, 6)))] = rng.randint(1, 5)
    counts = PreTokenCounts.from_dict(words)
    budget = rng.randint(1, 4)
    fit = fit_convex(counts, budget, roundings=ROUNDINGS, solver="highs")
    lp = TokenisationGraph(counts).linear_program(budget)
    relaxed = solve(lp, "highs").objective
    integer = solve_integer(lp)
    assert fit.bound <= relaxed + 1e-9
    assert relaxed <= integer + 1e-6
    for rounding, tokens in fit.tokens.items():
        assert integer <= tokens + 1e-6, rounding
        assert len(fit.vocabularies[rounding]) <= budget
        # The reported count is the shortest-path count of that vocabulary.
        assert tokens == shortest_path_tokens(single_bytes() + fit.vocabularies[rounding], counts)
    assert len(fit.vocabularies["det"]) == min(budget, TokenisationGraph(counts).num_colours)


def excerpt(size: int) -> list[str]:
    texts = []
    for name in ("handbook-en-US.txt", "python-textwrap.py.txt"):
        with open(f"tests/data/{name}", encoding="utf-8") as handle:
            texts.append(handle.read()[:size])
    return texts


def test_certify_a_bpe_tokeniser_on_text():
    texts = excerpt(2500)
    splitter = PreTokenizer("cl100k")
    words = collections.Counter(piece for text in texts for piece in splitter.split(text))
    bpe = NaiveBpe(dict(words), 40, pattern="cl100k")
    certificate = polytok.certify(bpe, polytok.texts(texts), solver="highs")
    own = sum(len(ids) for ids in bpe.encode_batch(texts))
    assert certificate.tokens == own
    assert certificate.bound <= certificate.shortest_path_tokens <= certificate.tokens
    assert certificate.gap >= 0 and certificate.shortest_path_gap >= 0
    assert certificate.budget == 40
    assert "at most 40 tokens" in certificate.covers
    # ConvexTok with the same budget on the same counts lands between the bound and BPE.
    fit = fit_convex(PreTokenCounts.from_dict(dict(words)), 40, solver="highs")
    assert fit.bound == pytest.approx(certificate.bound, rel=1e-6)
    assert fit.bound <= fit.tokens["det"] <= certificate.tokens


def test_certificate_round_trip_and_validation():
    certificate = Certificate.from_counts(
        bound=90.5, budget=3, covers="x", tokens=100, shortest_path_tokens=95, solver="highs",
        status="Optimal", residuals={"primal_row": 0.0}, seconds=1.5)
    assert certificate.gap == pytest.approx(100 * (100 / 90.5 - 1))
    data = certificate.to_dict()
    assert Certificate.from_dict(data) == certificate
    for broken in ({**data, "bound": "90"}, {**data, "tokens": -1},
                   {k: v for k, v in data.items() if k != "solver"}, {**data, "extra": 1}, [1]):
        with pytest.raises(FormatError):
            Certificate.from_dict(broken)


def test_options_are_checked():
    counts = PreTokenCounts.from_dict(PAPER)
    with pytest.raises(ConfigError, match="rounding"):
        fit_convex(counts, 3, roundings=("greedy",), solver="highs")
    with pytest.raises(ConfigError, match="solver"):
        fit_convex(counts, 3, solver="gurobi")
    with pytest.raises(ConfigError, match="max_token_bytes"):
        fit_convex(counts, 3, solver="highs", max_token_bytes=1)


def test_train_returns_a_certified_tokenizer(tmp_path):
    texts = excerpt(1500)
    splitter = PreTokenizer("cl100k")
    counts = PreTokenCounts.from_dict(collections.Counter(p for t in texts for p in splitter.split(t)), "cl100k")
    tokenizer = train_convex(counts, budget=30, special_tokens=["<|end|>"], solver="highs")
    assert tokenizer.vocab_size == 287
    certificate = Certificate.from_dict(tokenizer.certificate)
    assert certificate.bound <= certificate.tokens
    path = tmp_path / "convex.json"
    tokenizer.save(path)
    loaded = polytok.load(path)
    assert loaded.encode(texts[0]) == tokenizer.encode(texts[0])
    assert np.isclose(Certificate.from_dict(loaded.certificate).bound, certificate.bound)


def test_pdlp_training_does_not_depend_on_the_thread_count():
    """PDLP shards its sums in a fixed number of pieces, so 1, 2 and 3 threads iterate alike:
    the same vocabulary and the same certificate (its solve time aside)."""
    pytest.importorskip("ortools")
    texts = excerpt(3000)
    runs = []
    for threads in (1, 2, 3):
        tokenizer = polytok.train(polytok.texts(texts), algorithm="convex", vocab_size=256 + 60, solver="pdlp",
                                  num_threads=threads, initial_colours=80, rounds=1)
        certificate = dict(tokenizer.certificate)
        certificate.pop("seconds")
        runs.append(([tokenizer.token_bytes(i) for i in range(tokenizer.vocab_size)], certificate,
                     tokenizer.training))
    assert runs[0] == runs[1] == runs[2]


@pytest.fixture(scope="module")
def convex_tokenizer():
    texts = excerpt(1500)
    return polytok.train(polytok.texts(texts), algorithm="convex", vocab_size=256 + 40 + 1, special_tokens=["<|end|>"],
                         solver="highs", progress=False)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=200), data=st.binary(max_size=200))
def test_shortest_path_tokenizer_round_trips_any_text_and_bytes(convex_tokenizer, text, data):
    assert convex_tokenizer.decode_bytes(convex_tokenizer.encode_ordinary(data)) == data
    encoded = text.encode("utf-8", "surrogatepass")
    assert convex_tokenizer.decode_bytes(convex_tokenizer.encode_ordinary(text)) == encoded
    with_special = text + "<|end|>" + text
    ids = convex_tokenizer.encode(with_special, allowed_special="all")
    assert ids.count(convex_tokenizer.special_tokens["<|end|>"]) >= 1
    assert convex_tokenizer.decode_bytes(ids) == with_special.encode("utf-8", "surrogatepass")


def test_shortest_path_tokenizer_on_a_huge_input(convex_tokenizer):
    text = "a" * 1_000_000 + " " * 1_000_000 + excerpt(1)[0]
    assert convex_tokenizer.decode(convex_tokenizer.encode_ordinary(text)) == text
