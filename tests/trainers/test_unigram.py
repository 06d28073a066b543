"""Unigram: Viterbi and n-best equal brute force, sampling follows the lattice probabilities,
EM never lowers the likelihood, training is deterministic, and decoding inverts encoding. The
segmenter is exercised through the `Tokenizer` API (encode, encode(sample=True), encode_nbest)."""
from __future__ import annotations

import itertools
import math
import random
from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st
from scipy.stats import chisquare

import polytok
import polytok.progress
from polytok import _core
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, DecodeError, EncodeError
from polytok.pretokenize import PreTokenizer
from polytok.tokenizer import Tokenizer
from polytok.trainers import budget
from polytok.trainers.unigram import learn_unigram, train_unigram

from conftest import DATA
BYTES = [bytes([b]) for b in range(256)]


def segmentations(piece: bytes, vocab: dict[bytes, int]):
    """Every way to cut `piece` into vocabulary tokens, as id lists."""
    for cuts in itertools.product([False, True], repeat=len(piece) - 1):
        bounds = [0] + [i + 1 for i, cut in enumerate(cuts) if cut] + [len(piece)]
        parts = [piece[a:b] for a, b in zip(bounds, bounds[1:])]
        if all(p in vocab for p in parts):
            yield [vocab[p] for p in parts]


def random_model(rng: random.Random):
    """Bytes plus random substrings over 'abc', with random log-probabilities."""
    extra = sorted({bytes(rng.choice(b"abc") for _ in range(rng.randint(2, 4))) for _ in range(12)})
    vocab = BYTES + extra
    scores = [rng.uniform(-12.0, -1.0) for _ in vocab]
    return vocab, scores


def unigram(vocab, scores, pattern=None, special_tokens=None) -> Tokenizer:
    """A viterbi tokeniser; pattern None keeps the whole text one pre-token."""
    return Tokenizer(vocab, segmenter="viterbi", pattern=pattern, scores=scores, special_tokens=special_tokens)


def score_of(ids, scores):
    total = 0.0
    for i in ids:
        total += scores[i]
    return total


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32), st.binary(min_size=1, max_size=9).map(lambda b: bytes(b"abc"[x % 3] for x in b)))
def test_viterbi_and_nbest_equal_brute_force(seed, piece):
    vocab, scores = random_model(random.Random(seed))
    model = unigram(vocab, scores)
    index = {token: i for i, token in enumerate(vocab)}
    everything = sorted(segmentations(piece, index), key=lambda ids: -score_of(ids, scores))
    best = model.encode(piece)
    assert score_of(best, scores) == pytest.approx(score_of(everything[0], scores), abs=1e-9)
    assert best == everything[0] or score_of(best, scores) == pytest.approx(score_of(everything[1], scores))
    listed = model.encode_nbest(piece, 6)
    assert len(listed) == min(6, len(everything))
    assert len({tuple(ids) for ids, _ in listed}) == len(listed)
    assert listed[0][0] == best
    for (ids, score), expected in zip(listed, everything):
        assert b"".join(vocab[i] for i in ids) == piece
        assert score == pytest.approx(score_of(ids, scores), abs=1e-9)
        assert score == pytest.approx(score_of(expected, scores), abs=1e-9)
    assert [s for _, s in listed] == sorted((s for _, s in listed), reverse=True)


def test_nbest_of_a_text_combines_its_pre_tokens_in_score_order():
    vocab, scores = random_model(random.Random(5))
    model = unigram(vocab, scores, r"\S+|\s+")
    text = b"abca bcab"
    listed = model.encode_nbest(text, 10)
    assert len(listed) == 10 and len({tuple(ids) for ids, _ in listed}) == 10
    assert [s for _, s in listed] == sorted((s for _, s in listed), reverse=True)
    assert listed[0][0] == model.encode(text)
    index = {token: i for i, token in enumerate(vocab)}
    left = [score_of(ids, scores) for ids in segmentations(b"abca", index)]
    right = [score_of(ids, scores) for ids in segmentations(b"bcab", index)]
    totals = sorted((a + scores[index[b" "]] + b for a in left for b in right), reverse=True)
    assert [s for _, s in listed] == pytest.approx(totals[:10])
    for ids, _ in listed:
        assert model.decode_bytes(ids) == text


@pytest.mark.parametrize("alpha", [0.1, 1.0])
def test_sampling_frequencies_match_lattice_probabilities(alpha):
    vocab = BYTES + [b"ab", b"bc", b"abc", b"cd", b"bcd"]
    scores = [-6.0] * 256 + [-3.0, -2.5, -4.0, -3.5, -5.0]
    model = unigram(vocab, scores)
    index = {token: i for i, token in enumerate(vocab)}
    cuts = [tuple(ids) for ids in segmentations(b"abcd", index)]
    weights = [math.exp(alpha * score_of(ids, scores)) for ids in cuts]
    draws = 6000
    # Half the draws from single calls over seeds, half from one batch (a stream per document).
    observed = Counter(tuple(model.encode(b"abcd", sample=True, alpha=alpha, seed=seed)) for seed in range(draws // 2))
    observed.update(tuple(ids) for ids in model.encode_batch([b"abcd"] * (draws // 2), sample=True, alpha=alpha, seed=11))
    assert set(observed) <= set(cuts)
    expected = [draws * w / sum(weights) for w in weights]
    result = chisquare([observed[c] for c in cuts], expected)
    assert result.pvalue > 1e-3, (observed, expected)


def corpus_counts(name: str, limit: int | None = None) -> PreTokenCounts:
    text = (DATA / name).read_bytes()[:limit]
    return PreTokenCounts.from_dict(Counter(PreTokenizer("cl100k").split(text)))


def test_maximum_likelihood_em_never_lowers_the_likelihood():
    counts = corpus_counts("handbook-de-DE.txt", 20000)
    rng = random.Random(1)
    words = [w for w, _ in counts]
    extra = {w[i : i + n] for w in words for n in (2, 3, 5) for i in range(0, len(w) - n + 1, 2)}
    pieces = BYTES + sorted(extra)
    weights = [rng.uniform(0.1, 1.0) for _ in pieces]
    scores = [math.log(w / sum(weights)) for w in weights]  # a proper distribution to start from
    _, likelihoods = _core.unigram_em(counts.data, counts.offsets, counts.counts, pieces, scores, 12, bayesian=False)
    assert likelihoods[-1] > likelihoods[0] + 1.0
    for before, after in zip(likelihoods, likelihoods[1:]):
        assert after >= before - 1e-9 * abs(before)


def test_trainer_layout_budget_and_history():
    counts = corpus_counts("handbook-en-US.txt")
    vocab, scores, history = learn_unigram(counts, 600, seed_size=20000)
    assert vocab[:256] == BYTES
    assert len(vocab) == 856 and len(set(vocab)) == 856
    assert all(math.isfinite(s) for s in scores)
    # Learned pieces come by decreasing score and are substrings of some pre-token.
    assert scores[256:] == sorted(scores[256:], reverse=True)
    joined = b"\0".join(w for w, _ in counts)
    assert all(piece in joined and b"\0" not in piece for piece in vocab[256:])
    # Pieces never cut a UTF-8 character of valid text.
    for piece in vocab[256:]:
        piece.decode("utf-8")
    # EM rounds shrink the vocabulary down to the target.
    sizes = [pieces for pieces, _ in history]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] <= int(856 * 1.1)


def test_seed_size_bounds_the_candidates():
    counts = corpus_counts("kjv.txt", 100000)  # English: no multi-byte characters
    vocab, _, history = learn_unigram(counts, 5000, seed_size=40)
    assert 256 < len(vocab) <= 256 + 40
    # With room for every seed, nothing is pruned: two EM rounds and done.
    assert len(history) == 2


def test_trainer_is_independent_of_thread_count():
    counts = corpus_counts("handbook-fr-FR.txt", 200000)
    one = learn_unigram(counts, 500, seed_size=20000, num_threads=1)
    two = learn_unigram(counts, 500, seed_size=20000, num_threads=2)
    assert one == two


def test_unigram_beats_bytes_and_keeps_frequent_words_whole():
    counts = corpus_counts("kjv.txt", 400000)
    vocab, scores, _ = learn_unigram(counts, 1000)
    model = unigram(vocab, scores, "cl100k")
    assert [vocab[i] for i in model.encode(b" the LORD said")] == [b" the", b" LORD", b" said"]


TRAINED = {}


def trained_model() -> Tokenizer:
    if not TRAINED:
        counts = corpus_counts("handbook-zh-CN.txt")
        vocab, scores, _ = learn_unigram(counts, 700, seed_size=30000)
        TRAINED["model"] = unigram(vocab, scores, "cl100k", {"<|end|>": len(vocab)})
        TRAINED["vocab"] = vocab
    return TRAINED["model"]


# Arbitrary Unicode (lone surrogates included), arbitrary bytes, and text with the special token.
ANY_INPUT = st.one_of(
    st.text(st.characters(exclude_categories=())),
    st.binary(),
    st.lists(st.one_of(st.text(max_size=20), st.just("<|end|>")), max_size=5).map("".join),
)


@settings(max_examples=200, deadline=None)
@given(ANY_INPUT, st.integers(0, 2**64 - 1), st.sampled_from([0.0, 0.1, 1.0]))
def test_round_trip_on_any_input(text, seed, alpha):
    model = trained_model()
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    plain = model.encode(text, allowed_special="all")
    assert model.decode_bytes(plain) == data
    sampled = model.encode(text, allowed_special="all", sample=True, alpha=alpha, seed=seed)
    assert model.decode_bytes(sampled) == data
    listed = model.encode_nbest(text, 3, allowed_special="all")
    assert listed[0][0] == plain
    assert len({tuple(ids) for ids, _ in listed}) == len(listed)
    for ids, _ in listed:
        assert model.decode_bytes(ids) == data
    # The special token is one id in every cut.
    special = len(TRAINED["vocab"])
    assert sampled.count(special) == plain.count(special) == data.count(b"<|end|>")


def test_sampling_repeats_with_its_seed_and_varies_across_seeds():
    model = trained_model()
    text = "Debian 软件包管理系统 is a package manager"
    assert model.encode(text, sample=True, seed=42) == model.encode(text, sample=True, seed=42)
    assert len({tuple(model.encode(text, sample=True, seed=seed)) for seed in range(20)}) > 10
    # Very large alpha concentrates on the Viterbi path.
    assert model.encode(text, sample=True, alpha=50.0, seed=1) == model.encode(text)


def test_batch_sampling_is_independent_of_thread_count():
    model = trained_model()
    texts = [(DATA / "handbook-zh-CN.txt").read_text()[i * 500 : i * 500 + 500] for i in range(12)] * 2
    one = model.encode_batch(texts, num_threads=1, sample=True, seed=3)
    two = model.encode_batch(texts, num_threads=2, sample=True, seed=3)
    assert one == two
    assert one[0] == model.encode(texts[0], sample=True, seed=3)
    assert one[0] != one[12]  # a repeated text is another document with its own draws
    assert [model.decode(ids) for ids in one] == texts


def test_special_tokens_unsupported_options_and_bad_models():
    model = trained_model()
    ids = model.encode("a<|end|>b", allowed_special="all")
    assert len(TRAINED["vocab"]) in ids and model.decode(ids) == "a<|end|>b"
    listed = model.encode_nbest("a<|end|>b", 4, allowed_special="all")
    assert all(ids.count(len(TRAINED["vocab"])) == 1 for ids, _ in listed)
    # Disallowed special-token text raises in every mode, as in plain encode.
    with pytest.raises(EncodeError, match="<|end|>"):
        model.encode("a<|end|>b", sample=True)
    with pytest.raises(EncodeError, match="<|end|>"):
        model.encode_nbest("a<|end|>b", 2)
    with pytest.raises(ConfigError, match="dropout=p needs segmenter 'merges'.*supports sample=True and encode_nbest"):
        model.encode("abc", dropout=0.1)
    for alpha in (-1.0, float("inf"), None):
        with pytest.raises(ConfigError, match="alpha"):
            model.encode("abc", sample=True, alpha=alpha)
    for n in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="n must be an integer of at least 1"):
            model.encode_nbest("abc", n)
    with pytest.raises(DecodeError, match="not a token"):
        model.decode([10**6])
    with pytest.raises(ConfigError, match="0x00"):
        unigram(BYTES[1:], [-1.0] * 255)
    with pytest.raises(ConfigError, match="finite"):
        unigram(BYTES, [-1.0] * 255 + [float("nan")])
    with pytest.raises(ConfigError):
        budget(256, ["<s>"], 256)
    with pytest.raises(ConfigError, match="shrinking_factor"):
        learn_unigram(corpus_counts("kjv.txt", 1000), 10, shrinking_factor=1.0)


def test_train_unigram_returns_a_tokenizer_that_round_trips():
    counts = corpus_counts("kjv.txt", 100000)
    tokenizer = train_unigram(counts, budget=600 - 256 - 1, special_tokens=["<|end|>"])
    assert tokenizer.vocab_size == 600 and tokenizer.special_tokens == {"<|end|>": 599}
    text = "And God said, Let there be light: and there was light.<|end|>"
    ids = tokenizer.encode(text, allowed_special="all")
    assert ids[-1] == 599 and tokenizer.decode(ids) == text
    assert len(tokenizer.scores) == 599 and tokenizer.training["em_rounds"]


def test_training_shows_a_progress_bar_of_em_rounds(capsys, monkeypatch):
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)
    texts = [(DATA / "kjv.txt").read_text()]
    polytok.train(polytok.texts(texts), algorithm="unigram", vocab_size=400, progress=True)
    assert "Unigram EM" in capsys.readouterr().err
    polytok.train(polytok.texts(texts), algorithm="unigram", vocab_size=400, progress=False)
    assert "Unigram EM" not in capsys.readouterr().err
