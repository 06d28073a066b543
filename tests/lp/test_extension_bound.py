"""`certify(tokenizer, corpus, base=base)`: the bound over every extension of a base by K tokens,
against the brute-force best extension, the extension's own count, and the plain bound."""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

import polytok
from polytok.certify import Certificate
from polytok.counts import PreTokenCounts
from polytok.errors import ConfigError
from polytok.lp.bound import shortest_path_tokens, single_bytes
from polytok.pretokenize import PreTokenizer

sys.path.insert(0, str(Path(__file__).parent.parent))
from conftest import DATA  # noqa: E402

ENGLISH = (DATA / "handbook-en-US.txt").read_text(encoding="utf-8")[:20_000]


@pytest.fixture(scope="module")
def setting():
    base = polytok.train(polytok.texts([ENGLISH]), vocab_size=320, progress=False)
    german = (DATA / "handbook-de-DE.txt").read_text(encoding="utf-8")[:1500]
    counts = PreTokenCounts.from_dict(dict(Counter(PreTokenizer(base.pattern).split(german))), pattern=base.pattern)
    return base, counts


def best_extension(base, counts, k: int) -> int:
    """The fewest tokens any extension of `base` by `k` tokens reaches: every choice tried."""
    import itertools

    base_tokens = {token for token in base.vocab if len(token) > 1}
    candidates = {piece[i:j] for piece, _ in counts for i in range(len(piece)) for j in range(i + 2, len(piece) + 1)}
    vocabulary = sorted(base_tokens | set(single_bytes()))
    return min(shortest_path_tokens(vocabulary + list(chosen), counts)
               for chosen in itertools.combinations(sorted(candidates - base_tokens), k))


def test_the_bound_for_one_new_token_is_the_best_extension(setting):
    base, counts = setting
    extended = polytok.extend(base, counts, 1, progress=False)
    certificate = polytok.certify(extended, counts, base=base)
    best = best_extension(base, counts, 1)
    assert best - 0.01 <= certificate.bound <= best  # the relaxation is tight here
    assert certificate.budget == 1 and certificate.tokens >= best
    assert certificate.base_tokens == polytok.certify(base, counts).tokens > best


@pytest.mark.parametrize("k", [3, 12])
def test_the_bound_holds_below_every_extension_and_above_the_plain_bound(setting, k):
    base, counts = setting
    extended = polytok.extend(base, counts, k, progress=False)
    certificate = polytok.certify(extended, counts, base=base)
    plain = polytok.certify(extended, counts)
    # Every extension by k tokens, this one included, and the fewest tokens of its vocabulary.
    assert certificate.bound <= certificate.shortest_path_tokens <= certificate.tokens
    # Fixing the base's tokens (free, outside the budget) gives a far stronger bound than pricing them.
    assert certificate.bound > 1.3 * plain.bound
    # A bound for k tokens bounds fewer: the one-token optimum is above it.
    assert certificate.bound <= best_extension(base, counts, 1)
    assert "base's 320 tokens plus at most" in certificate.covers and "the base" in certificate.summary()
    again = Certificate.from_dict(certificate.to_dict())
    assert again == certificate


def test_bad_bases_are_refused(setting):
    base, counts = setting
    other = polytok.train(polytok.texts([ENGLISH[:5000]]), vocab_size=300, progress=False)
    extended = polytok.extend(base, counts, 3, progress=False)
    with pytest.raises(ConfigError, match="does not extend it"):
        polytok.certify(other, counts, base=base)
    with pytest.raises(ConfigError, match="dual solver"):
        polytok.certify(extended, counts, base=base, solver="highs")
    with pytest.raises(ConfigError, match="max_token_bytes"):
        polytok.certify(extended, counts, base=base, max_token_bytes=8)
    with pytest.raises(ConfigError, match="budgets="):
        polytok.certify(extended, counts, base=base, budgets=[1])


def test_certificates_without_base_tokens_still_load():
    record = Certificate.from_counts(bound=10.0, budget=1, covers="x", tokens=11, shortest_path_tokens=11,
                                     solver="dual", status="STAGES_DONE").to_dict()
    del record["base_tokens"]
    assert Certificate.from_dict(record).base_tokens is None


def test_cli_certifies_an_extension(setting, tmp_path, capsys):
    from polytok.cli import main

    base, counts = setting
    (tmp_path / "de.txt").write_text((DATA / "handbook-de-DE.txt").read_text(encoding="utf-8")[:1500], encoding="utf-8")
    base.save(tmp_path / "base.json")
    polytok.extend(base, counts, 3, progress=False).save(tmp_path / "ext.json")
    assert main(["-q", "certify", "-t", str(tmp_path / "ext.json"), "--base", str(tmp_path / "base.json"),
                 str(tmp_path / "de.txt"), "--json"]) == 0
    import json

    printed = json.loads(capsys.readouterr().out)
    assert printed["budget"] == 3 and printed["base_tokens"] > printed["tokens"] >= printed["bound"]


def test_convex_extension_keeps_the_base_and_meets_its_bound(setting):
    base, counts = setting
    one = polytok.extend(base, counts, 1, "convex", progress=False)
    assert one.certificate.tokens == best_extension(base, counts, 1)  # Det finds the best single token here
    extended = polytok.extend(base, counts, 12, "convex", progress=False)
    assert extended.segmenter == "shortest_path" and extended.vocab[: len(base.vocab)] == base.vocab
    assert len(extended.vocab) == base.n_vocab + 12 and extended.training["extended"]["first_new_id"] == base.n_vocab
    certificate = extended.certificate
    bpe = polytok.certify(polytok.extend(base, counts, 12, progress=False), counts, base=base)
    assert certificate.bound <= certificate.tokens <= bpe.tokens  # the same bound covers the BPE extension
    assert certificate.tokens == polytok.certify(extended, counts, base=base).tokens
    assert abs(polytok.certify(extended, counts, base=base).bound - certificate.bound) < 1e-6 * certificate.bound
    text = (DATA / "handbook-de-DE.txt").read_text(encoding="utf-8")[1500:4000]
    assert extended.decode(extended.encode_ordinary(text)) == text
    with pytest.raises(ConfigError, match="price"):
        polytok.extend(base, counts, 3, "convex", rounding="price", progress=False)
    wordpiece = polytok.train(polytok.texts([ENGLISH]), algorithm="wordpiece", vocab_size=600, progress=False)
    with pytest.raises(ConfigError, match="shortest path"):
        polytok.extend(wordpiece, counts, 3, "convex", progress=False)
