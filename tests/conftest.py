"""Shared fixtures: real text excerpts and BPE tokenisers trained on them.

The merge lists come from three sources: a naive pure-Python BPE (the textbook loop), HF
`tokenizers`' BPE trainer converted to polytok's id layout (ids 0..255 the bytes, then the merged
tokens in merge order), and `polytok.train` itself.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

import polytok
from polytok.pretokenize import PRESETS, PreTokenizer
from polytok.tokenizer import Tokenizer

DATA = Path(__file__).parent / "data"
SPECIAL_TOKENS = {"<|endoftext|>": 0, "<|fim_prefix|>": 1, "<|im_start|>": 2}


def excerpts() -> dict[str, str]:
    """The tests/data excerpts by file name."""
    return {path.name: path.read_text(encoding="utf-8") for path in sorted(DATA.glob("*.txt"))}


def naive_bpe(texts: list[str], pattern: str, num_merges: int) -> tuple[list[bytes], list[tuple[int, int]]]:
    """Textbook BPE over pre-token counts: merge the most frequent pair (ties: smallest ids)."""
    counts: Counter[bytes] = Counter()
    splitter = PreTokenizer(pattern)
    for text in texts:
        counts.update(splitter.split(text))
    words = {tuple(word): count for word, count in counts.items()}
    vocab = [bytes([byte]) for byte in range(256)]
    merges: list[tuple[int, int]] = []
    for _ in range(num_merges):
        pairs: Counter[tuple[int, int]] = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda pair: (-pairs[pair], pair))
        new_id = len(vocab)
        merges.append(best)
        vocab.append(vocab[best[0]] + vocab[best[1]])
        words = {replay_merge(word, best, new_id): count for word, count in words.items()}
    return vocab, merges


def replay_merge(word: tuple[int, ...], pair: tuple[int, int], new_id: int) -> tuple[int, ...]:
    """One merge applied left to right over a word."""
    out, i = [], 0
    while i < len(word):
        if i + 1 < len(word) and (word[i], word[i + 1]) == pair:
            out.append(new_id)
            i += 2
        else:
            out.append(word[i])
            i += 1
    return tuple(out)


def hf_bpe(texts: list[str], pattern: str, vocab_size: int) -> tuple[list[bytes], list[tuple[int, int]]]:
    """HF tokenizers' BPE trainer, its merges converted to polytok ids."""
    import tokenizers
    from tokenizers import models, pre_tokenizers, trainers

    from polytok.formats.huggingface.pre_tokenizers import from_byte_level

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(tokenizers.Regex(pattern), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train_from_iterator(texts, trainer)
    hf_merges = json.loads(hf.to_str())["model"]["merges"]
    vocab = [bytes([byte]) for byte in range(256)]
    ids = {token: token_id for token_id, token in enumerate(vocab)}
    merges = []
    for merge in hf_merges:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        left_id, right_id = ids[from_byte_level(left)], ids[from_byte_level(right)]
        joined = vocab[left_id] + vocab[right_id]
        if joined not in ids:
            ids[joined] = len(vocab)
            vocab.append(joined)
        merges.append((left_id, right_id))
    return vocab, merges


def with_specials(vocab: list[bytes], merges, pattern: str) -> Tokenizer:
    specials = {text: len(vocab) + offset for text, offset in SPECIAL_TOKENS.items()}
    return Tokenizer(vocab, segmenter="merges", pattern=pattern, special_tokens=specials, merges=merges)


@pytest.fixture(scope="session")
def text_excerpts() -> dict[str, str]:
    return excerpts()


@pytest.fixture(scope="session")
def trained_tokenizers() -> dict[str, Tokenizer]:
    """Several trained BPE tokenisers: naive BPE on two patterns, HF's trainer on every preset."""
    texts = list(excerpts().values())
    tokenizers_by_name = {}
    for preset in ("cl100k", "gpt2"):
        vocab, merges = naive_bpe([texts[1][:12000], texts[5][:8000]], PRESETS[preset], 120)
        tokenizers_by_name[f"naive-{preset}"] = with_specials(vocab, merges, preset)
    for preset in PRESETS:
        vocab, merges = hf_bpe(texts, PRESETS[preset], 1500 if preset == "cl100k" else 800)
        tokenizers_by_name[f"hf-{preset}"] = with_specials(vocab, merges, preset)
    for preset in ("cl100k", "o200k"):
        tokenizers_by_name[f"polytok-{preset}"] = polytok.train(
            polytok.texts(texts), algorithm="bpe", vocab_size=2000, pattern=preset, special_tokens=list(SPECIAL_TOKENS), progress=False
        )
    return tokenizers_by_name


TOKENIZER_NAMES = ["naive-cl100k", "naive-gpt2", *(f"hf-{preset}" for preset in PRESETS), "polytok-cl100k", "polytok-o200k"]
