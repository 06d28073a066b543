"""`polytok.extend`: BPE continued from a base, against the naive continuation, the base itself,
tiktoken and HF tokenizers; every base id kept; bad input."""
from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import polytok
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError, CorpusError
from polytok.pretokenize import PreTokenizer
from polytok.tokenizer import Tokenizer

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent))
import reference_extend  # noqa: E402
from conftest import DATA  # noqa: E402

SPECIALS = ["<|endoftext|>", "<|pad|>"]


def counted(text: str, pattern: str = "cl100k") -> dict[bytes, int]:
    return dict(Counter(PreTokenizer(pattern).split(text)))


def small_base(text: str, size: int, ranks: bool, specials: dict[str, int] | None = None) -> Tokenizer:
    """A BPE tokeniser of `size` tokens trained on `text`; with `ranks`, the same vocabulary as
    tiktoken ranks (no merge list)."""
    trained = polytok.train(polytok.texts([text]), vocab_size=size, progress=False)
    return Tokenizer(trained.vocab, segmenter="merges", pattern=trained.pattern, special_tokens=specials,
                     merges=None if ranks else trained.merges)


ENGLISH = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")[:20_000]
# Training halves; the rest of each file is held out.
GERMAN = (DATA / "handbook-de-DE.txt").read_text(encoding="utf-8")[:18_000]
CHINESE = (DATA / "handbook-zh-CN.txt").read_text(encoding="utf-8")[:11_000]
HELD_OUT = {name: (DATA / f"handbook-{name}.txt").read_text(encoding="utf-8")[start:]
            for name, start in (("de-DE", 18_000), ("zh-CN", 11_000), ("fr-FR", 20_000))}


@pytest.fixture(scope="module", params=["merges", "ranks"])
def rule(request) -> str:
    return request.param


@pytest.mark.parametrize("corpus", ["german", "chinese"])
def test_merges_equal_the_naive_continuation(rule, corpus):
    # Specials at 400 and 410 leave a gap after the ordinary ids: the new ids start at 411.
    base = small_base(ENGLISH, 380, rule == "ranks", {SPECIALS[0]: 400, SPECIALS[1]: 410})
    text = {"german": GERMAN, "chinese": CHINESE}[corpus][:6000]
    extended = polytok.extend(base, polytok.texts([text]), 150, progress=False)
    expected = reference_extend.extend(base.vocab, base.merges, counted(text), 411, 150)
    learned = extended.merges[len(base.merges):] if rule == "merges" else None
    if rule == "ranks":
        learned = reference_pairs(extended)
    assert learned == expected
    assert extended.training["extended"] == {
        "base_vocab_size": base.vocab_size, "first_new_id": 411, "new_tokens_asked": 150,
        "new_tokens": 150, "rule": rule,
    }


def reference_pairs(extended: Tokenizer) -> list[tuple[int, int]]:
    """The (left, right) each new token of a ranks extension was made from: its bytes cut by the
    lower-ranked tokens, as HF's export derives it."""
    from polytok.formats.huggingface.write import merges_from_ranks

    first = extended.training["extended"]["first_new_id"]
    by_bytes = {pair_bytes: pair for pair_bytes, pair in
                ((extended.vocab[left] + extended.vocab[right], (left, right)) for left, right in merges_from_ranks(extended.vocab))}
    return [by_bytes[extended.vocab[token_id]] for token_id in range(first, len(extended.vocab))]


def test_every_base_id_keeps_its_bytes_and_specials_their_ids(rule):
    base = small_base(ENGLISH, 300, rule == "ranks", {SPECIALS[0]: 300, SPECIALS[1]: 305})
    extended = polytok.extend(base, polytok.texts([GERMAN]), 64, progress=False)
    assert extended.vocab[: len(base.vocab)] == base.vocab
    assert extended.special_tokens == base.special_tokens
    assert extended.vocab[300:306] == [b""] * 6  # the special ids and the gaps stay free
    assert len(extended.vocab) == 306 + 64 and all(extended.vocab[306:])
    assert extended.pattern == base.pattern
    assert extended.n_vocab == 370 and extended.vocab_size == 300 + 2 + 64
    with pytest.raises(polytok.errors.DecodeError, match="id 301"):
        extended.decode([301])
    assert extended.decode([300]) == SPECIALS[0]


# Text in the base's and the extension's scripts, with the specials' text and hostile bytes.
mixed_text = st.lists(
    st.one_of(
        st.sampled_from(["the ", "Debian ", "Paket", " und ", "的", "软件包", "安装", " 系统", "\n\n", "  ", "1234"]),
        st.sampled_from(SPECIALS + ["<|", "|>"]),
        st.text(max_size=6),
    ),
    max_size=24,
).map("".join)


@pytest.fixture(scope="module")
def extended_pairs(rule):
    base = small_base(ENGLISH, 400, rule == "ranks", {SPECIALS[0]: 400, SPECIALS[1]: 401})
    return base, polytok.extend(base, polytok.texts([GERMAN, CHINESE]), 300, progress=False)


@settings(max_examples=150, deadline=None)
@given(text=mixed_text)
def test_text_without_new_pairs_encodes_as_the_base(extended_pairs, text):
    base, extended = extended_pairs
    before = base.encode(text, allowed_special="all")
    after = extended.encode(text, allowed_special="all")
    new_bytes = set(extended.vocab[402:])
    pieces = [base.token_bytes(token_id) for token_id in before]
    if not any(left + right in new_bytes for left, right in zip(pieces, pieces[1:])):
        assert after == before
    assert extended.decode(after) == text
    assert extended.encode(text, disallowed_special=()) == extended.encode_ordinary(text)


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=200))
def test_any_bytes_round_trip(extended_pairs, data):
    _, extended = extended_pairs
    assert extended.decode_bytes(extended.encode(data, disallowed_special=())) == data


def test_save_and_load_keep_the_ids(extended_pairs, tmp_path):
    _, extended = extended_pairs
    held_out = HELD_OUT["de-DE"]
    ids = extended.encode_ordinary(held_out)
    assert max(ids) >= 402  # the new tokens are used
    extended.save(tmp_path / "x.json")
    assert polytok.load(tmp_path / "x.json").encode_ordinary(held_out) == ids
    extended.save_tiktoken(tmp_path / "x.tiktoken")
    again = polytok.load(tmp_path / "x.tiktoken", pattern=extended.pattern, special_tokens=extended.special_tokens)
    assert again.encode_ordinary(held_out) == ids and again.vocab == extended.vocab
    extended.save_huggingface(tmp_path / "x-hf.json")
    assert polytok.load(tmp_path / "x-hf.json").encode_ordinary(held_out) == ids


def test_huggingface_reads_the_extension_with_the_same_ids(extended_pairs, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    _, extended = extended_pairs
    extended.save_huggingface(tmp_path / "x-hf.json")
    theirs = tokenizers.Tokenizer.from_file(str(tmp_path / "x-hf.json"))
    for name, text in HELD_OUT.items():
        assert theirs.encode(text, add_special_tokens=False).ids == extended.encode_ordinary(text), name
    assert theirs.token_to_id(SPECIALS[1]) == 401


# ---- the real OpenAI vocabularies -----------------------------------------------------------------

@pytest.fixture(scope="module")
def cl100k_extension(tmp_path_factory):
    pytest.importorskip("tiktoken")
    from real_vocabularies import load_pair, unpack

    directory = tmp_path_factory.mktemp("real")
    try:
        unpack(directory)
    except FileNotFoundError as error:
        pytest.skip(str(error))
    base, encoding = load_pair("cl100k_base", directory)
    chinese = (DATA / "handbook-zh-CN.txt").read_text(encoding="utf-8")
    half = len(chinese) // 2
    extended = polytok.extend(base, polytok.texts([chinese[:half]]), 400, progress=False)
    return base, encoding, extended, chinese[half:]


def test_cl100k_extension_keeps_the_layout(cl100k_extension):
    base, encoding, extended, _ = cl100k_extension
    assert extended.training["extended"]["first_new_id"] == 100277 == encoding.n_vocab
    assert extended.special_tokens == encoding._special_tokens
    assert extended.vocab[:100256] == base.vocab and extended.vocab[100256:100277] == [b""] * 21


def test_cl100k_extension_read_by_tiktoken_and_tokenizers_gives_the_same_ids(cl100k_extension, tmp_path):
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    base, encoding, extended, held_out = cl100k_extension
    extended.save_tiktoken(tmp_path / "ext.tiktoken")
    theirs = tiktoken.Encoding("cl100k_ext", pat_str=encoding._pat_str,
                               mergeable_ranks=load_tiktoken_bpe(str(tmp_path / "ext.tiktoken")),
                               special_tokens=encoding._special_tokens)
    ours = extended.encode_ordinary(held_out)
    assert theirs.encode_ordinary(held_out) == ours
    assert len(ours) < 0.99 * len(base.encode_ordinary(held_out))  # the held-out half is partly English
    english = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")[:30_000]
    assert theirs.encode(english + "<|endoftext|>", allowed_special="all") == \
        extended.encode(english + "<|endoftext|>", allowed_special="all")
    tokenizers = pytest.importorskip("tokenizers")
    extended.save_huggingface(tmp_path / "ext.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "ext.json"))
    assert hf.encode(held_out, add_special_tokens=False).ids == ours


# ---- bad input ------------------------------------------------------------------------------------

def test_bad_input_is_refused_in_one_line(tmp_path):
    base = small_base(ENGLISH, 300, False)
    with pytest.raises(ConfigError, match="new_tokens"):
        polytok.extend(base, polytok.texts([GERMAN]), 0, progress=False)
    with pytest.raises(ConfigError, match="unknown extension algorithm 'bep'"):
        polytok.extend(base, polytok.texts([GERMAN]), 10, "bep", progress=False)
    with pytest.raises(CorpusError, match="no pair of adjacent tokens"):
        polytok.extend(base, polytok.texts(["1 2 3 4 5"]), 10, progress=False)
    other = PreTokenCounts.from_dict({b"abc": 3}, pattern="gpt2")
    with pytest.raises(ConfigError, match="counted with pattern"):
        polytok.extend(base, other, 10, progress=False)
    wordpiece = polytok.train(polytok.texts([ENGLISH]), algorithm="wordpiece", vocab_size=600, progress=False)
    with pytest.raises(ConfigError, match="needs a BPE base"):
        polytok.extend(wordpiece, polytok.texts([GERMAN]), 10, progress=False)


def test_stops_early_when_pairs_run_out():
    base = small_base(ENGLISH, 300, False)
    extended = polytok.extend(base, polytok.texts(["Paket Paket Paket"]), 50, progress=False)
    assert 0 < extended.training["extended"]["new_tokens"] < 50 and extended.training["stopped_early"]


def test_cli_extends_and_refuses_bad_input(tmp_path):
    base = small_base(ENGLISH, 300, False, {SPECIALS[0]: 300})
    base.save(tmp_path / "base.json")
    (tmp_path / "de.txt").write_text(GERMAN, encoding="utf-8")
    run = [sys.executable, "-m", "polytok.cli", "-q", "extend", "-t", str(tmp_path / "base.json")]
    done = subprocess.run(run + [str(tmp_path / "de.txt"), "-k", "40", "-o", str(tmp_path / "out.tiktoken"),
                                 "--format", "tiktoken"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = polytok.load(tmp_path / "out.tiktoken", pattern="cl100k", special_tokens={SPECIALS[0]: 300})
    assert again.vocab == polytok.extend(base, polytok.texts([GERMAN]), 40, progress=False).vocab
    failed = subprocess.run(run + [str(tmp_path / "de.txt"), "-k", "0", "-o", str(tmp_path / "bad.json")],
                            capture_output=True, text=True)
    assert failed.returncode == 2 and "new_tokens" in failed.stderr and len(failed.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "bad.json").exists()


def test_transformers_gives_the_extensions_ids(extended_pairs):
    pytest.importorskip("transformers")
    _, extended = extended_pairs
    fast = extended.to_transformers()
    for name, text in HELD_OUT.items():
        assert fast(text)["input_ids"] == extended.encode_ordinary(text), name
    assert fast.convert_ids_to_tokens([401]) == [SPECIALS[1]]
    assert len(fast) == extended.vocab_size  # tokens; the embedding matrix needs n_vocab rows
    # the embedding rows that are new, noted where save_pretrained keeps them
    assert fast.init_kwargs["polytok_extended"] == {"base_vocab_size": 402, "new_ids": [402, extended.n_vocab]}
