"""The BPE trainer: exact agreement with the naive reference, determinism, options, bad input."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
import polytok.progress
import polytok.trainers.bpe
from polytok import _core
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.pretokenize import PreTokenizer
from polytok.trainers import train
from polytok.trainers.bpe import learn_merges, train_bpe

sys.path.insert(0, str(Path(__file__).parent))
import reference_bpe  # noqa: E402
from conftest import DATA  # noqa: E402


def pretokenized(names: list[str], limit: int) -> dict[bytes, int]:
    """Pre-token counts of the first `limit` bytes of some test excerpts, cl100k split."""
    splitter = PreTokenizer("cl100k")
    counts: Counter = Counter()
    for name in names:
        counts.update(splitter.split((DATA / name).read_bytes()[:limit]))
    return dict(counts)


def learn(counts: dict[bytes, int], num_merges: int, **options):
    return learn_merges(PreTokenCounts.from_dict(counts), num_merges, progress=False, **options)


# --- agreement with the naive algorithm -------------------------------------------------------


def test_hand_worked_example():
    # Pairs: (a,a) 3*3 + 2*5 = 19, (a,b) 2*2 = 4, (b,a) 1*2 + 1 = 3 -> "aa" first; then
    # "aa a" in aaa (5) beats "ab" (4); "aa aa" in aaaa (3); "ab ab" (2); "ba" (1).
    vocab, merges, counts = learn({b"aaaa": 3, b"abab": 2, b"aaa": 5, b"ba": 1}, 100)
    assert merges == [(97, 97), (256, 97), (97, 98), (256, 256), (258, 258), (98, 97)]
    assert counts == [19, 5, 4, 3, 2, 1]
    assert vocab[256:] == [b"aa", b"aaa", b"ab", b"aaaa", b"abab", b"ba"]


def test_overlapping_pair_is_replaced_left_to_right():
    # "aaaaa" has (a,a) four times; merging gives "aa aa a", not three "aa"s, so the next
    # pairs are (aa,aa) and (aa,a) once each, and the tie goes to the smaller (256, 97).
    _, merges, counts = learn({b"aaaaa": 1}, 10)
    assert merges == [(97, 97), (256, 97), (256, 257)]
    assert counts == [4, 1, 1]


def test_ties_go_to_the_smallest_pair():
    _, merges, _ = learn({b"cd": 1, b"ba": 1, b"ab": 1}, 10)
    assert merges == [(97, 98), (98, 97), (99, 100)]


def test_the_article_corpus_agrees_with_its_published_merges():
    # The seed article's corpus, split on whitespace. Its merges without the end marker it glues
    # to words (bytes have none) keep their counts; UTF-8 pairs such as "i\xc3" come in between.
    corpus = """el niño juega en el jardín la niña juega en el jardín
el niño aprende programación la niña aprende programación
la programación se aprende programando y programando se aprende
el profesor enseña programación la profesora enseña programación
enseñar no es lo mismo que aprender el niño enseña a la niña
la niña enseña al niño programación y el niño aprende"""
    counts = Counter(word.encode() for word in corpus.split())
    vocab, merges, winning = learn(counts, 40)
    assert (vocab, merges, winning) == reference_bpe.train(counts, 40)
    article = [(token, count) for token, count in zip(vocab[256:], winning) if token in (b"pr", b"en", b"pro")]
    assert article == [(b"pr", 16), (b"en", 13), (b"pro", 10)]


corpora = st.dictionaries(
    st.one_of(
        st.binary(min_size=1, max_size=12).map(lambda b: bytes(97 + x % 2 for x in b)),
        st.binary(min_size=1, max_size=12).map(lambda b: bytes(97 + x % 3 for x in b)),
        st.binary(min_size=1, max_size=6),
    ),
    st.one_of(st.integers(1, 5), st.integers(1, 2**40)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(corpora, st.integers(0, 40), st.sampled_from([1, 1, 2, 3, 10]))
def test_merges_equal_the_naive_reference(counts, num_merges, min_frequency):
    got = learn(counts, num_merges, min_frequency=min_frequency)
    assert got == reference_bpe.train(counts, num_merges, min_frequency)
    vocab = got[0]
    assert len(set(vocab)) == len(vocab), "every token has its own bytes"


@pytest.mark.parametrize(
    "names",
    [["kjv.txt", "handbook-en-US.txt"], ["handbook-zh-CN.txt", "handbook-de-DE.txt", "python-textwrap.py.txt"]],
)
def test_merges_equal_the_naive_reference_on_real_text(names):
    counts = pretokenized(names, 6000)
    assert learn(counts, 150) == reference_bpe.train(counts, 150)


# --- determinism, stopping, progress ----------------------------------------------------------


def test_same_merges_with_one_and_two_threads():
    counts = PreTokenCounts.from_dict(pretokenized(sorted(p.name for p in DATA.glob("*.txt")), 10**6))
    runs = [
        _core.train_bpe(counts.data, counts.offsets, counts.counts, 3000, min_frequency=1, num_threads=threads, progress=None, progress_every=256)
        for threads in (1, 2, None)
    ]
    for merges, winning in runs[1:]:
        assert merges.tobytes() == runs[0][0].tobytes()
        assert winning.tobytes() == runs[0][1].tobytes()
    assert runs[0][0].shape == (3000, 2)


def test_min_frequency_stops_early_with_a_prefix_of_the_full_run():
    counts = pretokenized(["kjv.txt"], 20000)
    _, full, full_counts = learn(counts, 2000)
    vocab, merges, winning = learn(counts, 2000, min_frequency=5)
    cut = next(i for i, count in enumerate(full_counts) if count < 5)
    assert merges == full[:cut] and winning == full_counts[:cut]
    assert len(vocab) == 256 + cut < 256 + 2000


def test_training_runs_out_of_pairs():
    vocab, merges, _ = learn({b"abc": 2, b"x": 9}, 50)
    assert merges == [(97, 98), (256, 99)] and vocab[-1] == b"abc"


def test_progress_reports_every_block_of_merges_and_the_end():
    counts = PreTokenCounts.from_dict(pretokenized(["kjv.txt"], 20000))
    seen: list[int] = []
    merges, _ = _core.train_bpe(counts.data, counts.offsets, counts.counts, 600, min_frequency=1, num_threads=None, progress=seen.append, progress_every=300)
    assert seen == [300, 600] and len(merges) == 600
    seen.clear()  # asking for more merges than the text allows: the last report is where it stopped
    merges, _ = _core.train_bpe(counts.data, counts.offsets, counts.counts, 5000, min_frequency=1, num_threads=None, progress=seen.append, progress_every=300)
    assert 600 < len(merges) < 5000 and seen == list(range(300, len(merges), 300)) + [len(merges)]


def test_an_exception_in_progress_stops_training_and_propagates():
    counts = PreTokenCounts.from_dict(pretokenized(["kjv.txt"], 20000))

    def interrupt(done: int) -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _core.train_bpe(counts.data, counts.offsets, counts.counts, 1000, min_frequency=1, num_threads=None, progress=interrupt, progress_every=10)


def test_progress_bar_shows_and_does_not_change_the_result(capsys, monkeypatch):
    monkeypatch.setattr(polytok.progress, "DELAY_SECONDS", 0)
    counts = pretokenized(["kjv.txt"], 5000)
    quiet = learn(counts, 300)
    assert capsys.readouterr().err == ""
    assert learn_merges(PreTokenCounts.from_dict(counts), 300, progress=True) == quiet
    assert "BPE merges" in capsys.readouterr().err


# --- the Tokenizer and the dispatcher ---------------------------------------------------------


class RecordingTokenizer:
    """Stands in for polytok.tokenizer.Tokenizer to check what the trainer hands it."""

    def __init__(self, vocab, **fields):
        self.vocab, self.fields = vocab, fields


@pytest.fixture
def recording_tokenizer(monkeypatch):
    monkeypatch.setattr(polytok.trainers.bpe, "Tokenizer", RecordingTokenizer)
    return RecordingTokenizer


def test_train_bpe_builds_a_merges_tokenizer_with_specials_last(recording_tokenizer):
    counts = PreTokenCounts.from_dict({b"hello": 4, b" world": 3, b"!": 1}, pattern="gpt2")
    tokenizer = train_bpe(counts, budget=3, special_tokens=["<|a|>", "<|b|>"], progress=False)
    # (h,e), (e,l), (l,l), (l,o) all occur 4 times: (e,l) is the smallest; then (h,el) and (l,o)
    # tie at 4 and h < l.
    assert tokenizer.vocab[256:] == [b"el", b"hel", b"lo"]
    fields = tokenizer.fields
    assert fields["segmenter"] == "merges" and fields["algorithm"] == "bpe" and fields["pattern"] == "gpt2"
    assert fields["special_tokens"] == {"<|a|>": 259, "<|b|>": 260}
    assert [tokenizer.vocab[a] + tokenizer.vocab[b] for a, b in fields["merges"]] == tokenizer.vocab[256:]
    assert fields["training"]["merges"] == 3 and fields["training"]["stopped_early"] is False


def test_special_ids_follow_the_learned_tokens_when_training_stops_early(recording_tokenizer):
    counts = PreTokenCounts.from_dict({b"ab": 1})
    tokenizer = train_bpe(counts, budget=1000 - 257, special_tokens=["<s>"], progress=False)
    assert len(tokenizer.vocab) == 257 and tokenizer.fields["special_tokens"] == {"<s>": 257}
    assert tokenizer.fields["training"]["stopped_early"] is True


def test_train_uses_the_counts_and_their_pattern(recording_tokenizer):
    counts = PreTokenCounts.from_dict({b"abab": 2}, pattern=polytok.pretokenize.PRESETS["cl100k"])
    tokenizer = train(counts, vocab_size=np.int64(258), min_frequency=np.uint8(1), progress=False)
    assert tokenizer.vocab[256:] == [b"ab", b"abab"]
    # The same pattern named by its preset is not a conflict.
    assert train(counts, vocab_size=258, pattern="cl100k", progress=False).vocab == tokenizer.vocab


def test_train_counts_a_corpus_with_the_pattern_and_special_tokens(recording_tokenizer, monkeypatch):
    calls = []

    def count(corpus, **options):
        calls.append((corpus, options))
        return PreTokenCounts.from_dict({b"xyxy": 1}, pattern=options["pattern"])

    monkeypatch.setattr(polytok.trainers, "count", count)
    tokenizer = train(["some text"], vocab_size=260, pattern="gpt2", special_tokens=["<s>"], progress=False,
                      text_field="body")
    assert calls == [(["some text"], {"pattern": "gpt2", "special_tokens": ["<s>"], "num_threads": None,
                                      "progress": False, "text_field": "body"})]
    assert tokenizer.fields["special_tokens"] == {"<s>": 258}


def test_trained_tokenizer_cuts_each_pre_token_as_training_left_it():
    # Encoding replays the merges, and must give every training pre-token the pieces the naive
    # training loop ended with.
    names = ["kjv.txt", "handbook-fr-FR.txt", "handbook-zh-CN.txt"]
    text = b"".join((DATA / name).read_bytes()[:8000] for name in names)
    pieces = Counter(PreTokenizer("cl100k").split(text))
    tokenizer = train(PreTokenCounts.from_dict(pieces, pattern="cl100k"), vocab_size=957,
                      special_tokens=["<|endoftext|>"], progress=False)
    assert tokenizer.vocab_size == 957 and tokenizer.special_tokens == {"<|endoftext|>": 956}
    words = {tuple(word): count for word, count in pieces.items()}
    for k, pair in enumerate(tokenizer.merges):
        words = reference_bpe.merge(words, pair, 256 + k)
    for word in words:
        assert tokenizer.encode_ordinary(b"".join(tokenizer.vocab[i] for i in word)) == list(word)
    ids = tokenizer.encode_ordinary(text)
    assert len(ids) == sum(len(word) * count for word, count in words.items())
    assert tokenizer.decode_bytes(ids) == text


# --- bad input ----------------------------------------------------------------------------------

SMALL = PreTokenCounts.from_dict({b"abc": 1}, pattern="cl100k")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: train(SMALL, vocab_size=257, special_tokens=["<a>", "<b>"]), "vocab_size must be an integer of at least 258"),
        (lambda: train(SMALL, vocab_size=100), "at least 256"),
        (lambda: train(SMALL, vocab_size=300.0), "vocab_size"),
        (lambda: train(SMALL, vocab_size=True), "vocab_size"),
        (lambda: train(SMALL, algorithm="wordpeace", vocab_size=300), "unknown algorithm 'wordpeace'; known: bpe"),
        (lambda: train(SMALL, vocab_size=300, special_tokens=["<s>", "<t>", "<s>"]), "['<s>'] given more than once"),
        (lambda: train(SMALL, vocab_size=300, special_tokens="<s>"), "list of strings"),
        (lambda: train(SMALL, vocab_size=300, special_tokens=[""]), "non-empty string"),
        (lambda: train(SMALL, vocab_size=300, pattern="gpt2"), "differs from the pattern"),
        (lambda: train(SMALL, vocab_size=300, min_frequency=0), "min_frequency must be an integer of at least 1"),
        (lambda: train(SMALL, vocab_size=300, num_threads=0), "num_threads"),
        (lambda: train(SMALL, vocab_size=300, rounding="up"), "unknown option(s) ['rounding'] for algorithm 'bpe'"),
        (lambda: train(SMALL, vocab_size=300, text_field="body"), "only apply when reading a corpus"),
    ],
)
def test_bad_options_are_config_errors(call, message):
    with pytest.raises(ConfigError) as error:
        call()
    assert message in str(error.value)


def test_empty_counts_are_a_corpus_error():
    with pytest.raises(CorpusError, match="empty"):
        train(PreTokenCounts.from_dict({}), vocab_size=300)


@pytest.mark.parametrize(
    "offsets, counts, message",
    [
        ([0, 2], [1, 1], "one more entry"),
        ([0, 2, 5], [1, 1], "end at the data length 4"),
        ([0, 3, 2, 4], [1, 1, 1], "must not decrease"),
    ],
)
def test_inconsistent_word_count_arrays_are_rejected(offsets, counts, message):
    broken = PreTokenCounts(b"abcd", np.array(offsets), np.array(counts))
    with pytest.raises(ConfigError, match=message):
        learn_merges(broken, 10, progress=False)
