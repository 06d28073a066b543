"""WordPiece: the trainer equals a naive reference, longest_match equals a naive greedy cut, and
decoding inverts encoding on any input."""
from __future__ import annotations

import random
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

import polytok
import polytok.progress
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.pretokenize import PreTokenizer
from polytok.tokenizer import Tokenizer
from polytok.trainers import base_size, budget
from polytok.trainers.wordpiece import learn_wordpiece, train_wordpiece

from conftest import DATA


def naive_wordpiece(counts: dict[bytes, int], budget: int, marker: bytes | None, min_frequency: int = 1):
    """Recount everything each round; pick max n(a,b)/(n(a)n(b)), ties to the smallest pair."""
    tokens = [(bytes([b]), False) for b in range(256)]
    if marker:
        tokens += [(bytes([b]), True) for b in range(256)]
    ids = {token: i for i, token in enumerate(tokens)}
    offset = 256 if marker else 0
    words = [([w[0]] + [offset + b for b in w[1:]], c) for w, c in sorted(counts.items()) if w and c]
    merges, learned = [], 0

    def allowed(a: int, b: int) -> bool:
        text, continuation = tokens[a][0] + tokens[b][0], tokens[a][1]
        return not (marker and not continuation and len(text) > len(marker) and text.startswith(marker))

    while learned < budget:
        symbols, pairs = Counter(), Counter()
        for word, count in words:
            for s in word:
                symbols[s] += count
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        candidates = [p for p in pairs if allowed(*p) and pairs[p] >= min_frequency]
        if not candidates:
            break
        a, b = max(candidates, key=lambda p: (Fraction(pairs[p], symbols[p[0]] * symbols[p[1]]), -p[0], -p[1]))
        new = (tokens[a][0] + tokens[b][0], tokens[a][1])
        if new not in ids:
            ids[new] = len(tokens)
            tokens.append(new)
            learned += 1
        merged = ids[new]
        merges.append((a, b, merged))
        rebuilt = []
        for word, count in words:
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    out.append(merged)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            rebuilt.append((out, count))
        words = rebuilt
    vocab = [marker + text if continuation and marker else text for text, continuation in tokens]
    return vocab, merges


def naive_longest_match(vocab: list[bytes], marker: bytes | None, piece: bytes) -> list[int]:
    initial, continuation = {}, {}
    for i, token in enumerate(vocab):
        if marker and token.startswith(marker) and len(token) > len(marker):
            continuation.setdefault(token[len(marker):], i)
        else:
            initial.setdefault(token, i)
    if not marker:
        continuation = initial
    out, position, table = [], 0, initial
    while position < len(piece):
        for end in range(len(piece), position, -1):
            if piece[position:end] in table:
                out.append(table[piece[position:end]])
                position = end
                break
        table = continuation
    return out


# Few distinct bytes (one of them '#', one a UTF-8 lead byte) so pairs collide and merges reuse tokens.
corpora = st.dictionaries(
    st.binary(min_size=1, max_size=7).map(lambda b: bytes(b"ab#\xc3"[x % 4] for x in b)),
    st.integers(1, 6),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(corpora, st.integers(0, 30), st.sampled_from([b"##", b"#", None]), st.sampled_from([1, 1, 3, 8]))
def test_trainer_equals_naive_reference(counts, budget, marker, min_frequency):
    expected = naive_wordpiece(counts, budget, marker, min_frequency)
    got = learn_wordpiece(PreTokenCounts.from_dict(counts), budget, marker.decode() if marker else None, min_frequency)
    assert got == expected


def test_trainer_equals_naive_reference_on_real_text():
    text = (DATA / "handbook-fr-FR.txt").read_bytes()[:6000]
    counts = Counter(PreTokenizer("cl100k").split(text))
    expected = naive_wordpiece(counts, 60, b"##")
    assert learn_wordpiece(PreTokenCounts.from_dict(counts), 60, "##") == expected


def test_score_prefers_informative_pairs_over_frequent_ones():
    # 'e'+'n' is the most frequent pair but both letters are everywhere; 'q'+'u' always co-occur.
    counts = {b"en": 10, b"ene": 10, b"ne": 10, b"qu": 2, b"e": 30, b"n": 30}
    vocab, merges = learn_wordpiece(PreTokenCounts.from_dict(counts), 1, None)
    assert vocab[256:] == [b"qu"]


def test_vocab_layout_and_marker_rule():
    text = (DATA / "handbook-en-US.txt").read_bytes()
    counts = PreTokenCounts.from_dict(Counter(PreTokenizer("cl100k").split(text)))
    vocab, _ = learn_wordpiece(counts, 500, "##")
    assert vocab[:256] == [bytes([b]) for b in range(256)]
    assert vocab[256:512] == [b"##" + bytes([b]) for b in range(256)]
    assert len(vocab) == 1012 and len(set(vocab)) == len(vocab)
    # A word-initial token longer than the marker never starts with it (it would read as one).
    learned = vocab[512:]
    assert any(t.startswith(b"##") for t in learned)
    for token in learned:
        assert not token.startswith(b"##") or len(token) > 2


def wordpiece(vocab: list[bytes], marker: str | None, pattern: str | None = None, special_tokens=None) -> Tokenizer:
    """A longest_match tokeniser; pattern None keeps the whole text one pre-token."""
    return Tokenizer(
        vocab, segmenter="longest_match", pattern=pattern, continuation_marker=marker, special_tokens=special_tokens
    )


def trained_model(marker: str | None) -> tuple[list[bytes], Tokenizer, Tokenizer]:
    """The vocabulary, its tokeniser with cl100k and a special token, and one without a split."""
    text = (DATA / "handbook-es-ES.txt").read_bytes()
    counts = PreTokenCounts.from_dict(Counter(PreTokenizer("cl100k").split(text)))
    vocab, _ = learn_wordpiece(counts, 400, marker)
    return vocab, wordpiece(vocab, marker, "cl100k", {"<|end|>": len(vocab)}), wordpiece(vocab, marker)


MODELS = {marker: trained_model(marker) for marker in ("##", None)}


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary()), st.sampled_from(["##", None]))
def test_round_trip_on_any_input(text, marker):
    _, model, _ = MODELS[marker]
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    assert model.decode_bytes(model.encode_ordinary(data)) == data


def test_special_tokens_get_ids_after_the_vocabulary():
    vocab, model, _ = MODELS["##"]
    ids = model.encode("hola<|end|>mundo", allowed_special="all")
    assert ids.count(len(vocab)) == 1
    assert model.decode(ids) == "hola<|end|>mundo"


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40), st.sampled_from(["##", None]))
def test_longest_match_equals_naive_greedy(text, marker):
    # Valid UTF-8 without a pattern is one pre-token, so the whole text is cut greedily.
    vocab, _, whole = MODELS[marker]
    piece = text.encode("utf-8")
    assert whole.encode_ordinary(piece) == naive_longest_match(vocab, marker.encode() if marker else None, piece)


def test_longest_match_on_small_handmade_vocab():
    vocab = [bytes([b]) for b in range(256)] + [b"##" + bytes([b]) for b in range(256)]
    vocab += [b"un", b"unaff", b"##aff", b"##able", b"##a"]
    model = wordpiece(vocab, "##")
    assert [vocab[i] for i in model.encode(b"unaffable")] == [b"unaff", b"##able"]
    # Greedy, not optimal: "unab" takes "un" first, then "a" as a continuation.
    assert [vocab[i] for i in model.encode(b"unab")] == [b"un", b"##a", b"##b"]


def test_vocab_without_every_byte_is_rejected():
    vocab = [bytes([b]) for b in range(256)]
    with pytest.raises(ConfigError, match="continuation"):
        wordpiece(vocab, "##")
    with pytest.raises(ConfigError, match="0x41"):
        wordpiece([t for t in vocab if t != b"A"], None)


def test_min_frequency_changes_the_winner_and_is_checked():
    counts = {b"en": 10, b"ene": 10, b"ne": 10, b"qu": 2, b"e": 30, b"n": 30}
    vocab, _ = learn_wordpiece(PreTokenCounts.from_dict(counts), 1, None, min_frequency=3)
    assert vocab[256:] in ([b"en"], [b"ne"])
    with pytest.raises(ConfigError, match="min_frequency"):
        learn_wordpiece(PreTokenCounts.from_dict(counts), 1, None, min_frequency=0)


def test_budget_accounting():
    assert budget(1000, [], base_size("wordpiece", {})) == 1000 - 512
    assert budget(1000, ["<s>"], base_size("wordpiece", {"continuation_marker": None})) == 1000 - 257
    with pytest.raises(ConfigError, match="at least 513"):
        budget(512, ["<s>"], base_size("wordpiece", {"continuation_marker": "##"}))
    with pytest.raises(ConfigError, match="at least 513"):
        polytok.train(PreTokenCounts.from_dict({b"ab": 1}), algorithm="wordpiece", vocab_size=512,
                      special_tokens=["<s>"])


def test_trainer_is_deterministic_and_fast_path_matches_on_shuffled_input():
    rng = random.Random(7)
    words = {bytes(rng.choice(b"abcde") for _ in range(rng.randint(1, 9))): rng.randint(1, 50) for _ in range(300)}
    first = learn_wordpiece(PreTokenCounts.from_dict(words), 80, "##")
    second = learn_wordpiece(PreTokenCounts.from_dict(dict(reversed(list(words.items())))), 80, "##")
    assert first == second


def test_train_wordpiece_returns_a_tokenizer_that_round_trips():
    counts = PreTokenCounts.from_dict(Counter(PreTokenizer("cl100k").split((DATA / "kjv.txt").read_bytes()[:100000])),
                                  PreTokenizer("cl100k").pattern)
    tokenizer = train_wordpiece(counts, budget=700 - 512 - 1, special_tokens=["<|end|>"])
    assert tokenizer.vocab_size == 700 and tokenizer.special_tokens == {"<|end|>": 699}
    text = "In the beginning God created the heaven and the earth.<|end|>"
    ids = tokenizer.encode(text, allowed_special="all")
    assert ids[-1] == 699 and tokenizer.decode(ids) == text
    assert tokenizer.training["continuation_marker"] == "##"


def test_training_shows_a_progress_bar_of_learned_tokens(capsys, monkeypatch):
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)
    texts = [(DATA / "kjv.txt").read_text()]
    polytok.train(polytok.texts(texts), algorithm="wordpiece", vocab_size=1200, progress=True)
    assert "WordPiece tokens" in capsys.readouterr().err
    polytok.train(polytok.texts(texts), algorithm="wordpiece", vocab_size=1200, progress=False)
    assert "WordPiece tokens" not in capsys.readouterr().err
