"""polytok.lm.evaluate with PyTorch: the bits-per-byte arithmetic (a uniform model scores exactly
tokens × log2 V / bytes), a tiny real run that learns, the same result from the same seed on the
CPU, equal training bytes across tokenisers, and results kept when a run is interrupted.

Skipped where PyTorch is not installed (it comes with the `lm` extra: pip install '.[lm]')."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="polytok.lm needs PyTorch: pip install '.[lm]' to run these tests")

import polytok  # noqa: E402
from polytok.errors import CorpusError  # noqa: E402
from polytok.lm import evaluate, train  # noqa: E402
from polytok.lm.data import encode_windows, window_offsets  # noqa: E402

DATA = Path(__file__).parents[1] / "data"
KJV = (DATA / "kjv.txt").read_text(encoding="utf-8")
TRAIN, VALID = KJV[: len(KJV) * 4 // 5], KJV[len(KJV) * 4 // 5:]

# A run small enough for a test: about 300 steps of a one-layer model on 24 KB of text.
TINY = {"depth": 1, "width": 64, "context_bytes": 128, "batch_size": 8, "budget": 300 * 8 * 128,
        "learning_rate": 1e-2, "device": "cpu", "torch_threads": 1, "progress": False}


@pytest.fixture(scope="module")
def bpe() -> polytok.Tokenizer:
    return polytok.train(polytok.texts([TRAIN]), "bpe", vocab_size=384, progress=False)


def byte_tokenizer() -> polytok.Tokenizer:
    return polytok.Tokenizer([bytes([b]) for b in range(256)], segmenter="merges", pattern=None, merges=[])


def uniform_model(vocab_size: int):
    """A stub that gives every position the uniform distribution over the vocabulary."""
    return lambda ids: torch.zeros(*ids.shape, vocab_size)


@pytest.mark.parametrize("context_bytes", [64, 500])
def test_a_uniform_model_scores_tokens_times_log2_v_over_bytes(bpe, context_bytes):
    text = VALID.encode()
    offsets = window_offsets(text, context_bytes)
    windows = encode_windows(bpe, text, offsets, None, "validation")
    tokens = sum(len(bpe.encode(text[a:b].decode())) for a, b in zip(offsets[:-1], offsets[1:]))
    nats = train.validation_nats(uniform_model(bpe.vocab_size), windows, batch_size=7, device=torch.device("cpu"))
    assert train.bits_per_byte(nats, windows.bytes) == pytest.approx(tokens * math.log2(384) / len(text), rel=1e-6)


def test_an_untrained_model_scores_the_uniform_bound(bpe, monkeypatch):
    """The model starts with a zero output matrix: uniform predictions, so BpB = the bound."""
    monkeypatch.setattr(train, "train_model", lambda *a, **k: {"steps": 0, "train_bytes": 0, "train_tokens": 0,
                                                                "train_seconds": 0.0, "curve": {}})
    report = evaluate({"bpe": bpe}, polytok.texts([TRAIN]), polytok.texts([VALID]), **TINY)
    result = report["results"]["bpe"]
    assert result["valid_bpb"] == pytest.approx(result["uniform_bpb"], rel=1e-6)
    assert result["uniform_bpb"] == pytest.approx(result["valid_tokens_per_byte"] * math.log2(384), rel=1e-12)


@pytest.fixture(scope="module")
def tiny_run(bpe):
    return evaluate({"bpe": bpe, "bytes": byte_tokenizer()}, polytok.texts([TRAIN]), polytok.texts([VALID]),
                    seeds=[3], **TINY)


def test_a_tiny_run_learns(tiny_run):
    for name, result in tiny_run["results"].items():
        (run,) = result["runs"]
        curve = run["curve"]
        assert len(curve["loss"]) >= 10
        assert curve["loss"][-1] < 0.6 * curve["loss"][0], name
        assert result["valid_bpb"] < 0.7 * result["uniform_bpb"], name
        assert result["valid_bpb"] < 4.0, name
        assert result["valid_bpb_stderr"] is None and result["seeds"] == 1


def test_every_tokenizer_reads_the_same_training_bytes(tiny_run):
    runs = [result["runs"][0] for result in tiny_run["results"].values()]
    assert len({run["train_bytes"] for run in runs}) == 1
    assert len({run["steps"] for run in runs}) == 1
    assert TINY["budget"] - TINY["batch_size"] * TINY["context_bytes"] < runs[0]["train_bytes"] <= TINY["budget"]
    bpe, byte = tiny_run["results"]["bpe"], tiny_run["results"]["bytes"]
    assert byte["valid_tokens_per_byte"] == 1.0 and bpe["valid_tokens_per_byte"] < 0.6
    assert runs[0]["train_tokens"] < runs[1]["train_tokens"]


def test_the_same_seed_gives_the_same_result_on_cpu(bpe, tiny_run):
    again = evaluate({"bpe": bpe}, polytok.texts([TRAIN]), polytok.texts([VALID]), seeds=[3], **TINY)
    first, second = tiny_run["results"]["bpe"]["runs"][0], again["results"]["bpe"]["runs"][0]
    assert second["valid_bpb"] == first["valid_bpb"]
    assert second["curve"]["loss"] == first["curve"]["loss"]
    assert not torch.are_deterministic_algorithms_enabled()  # the caller's setting is restored
    other = evaluate({"bpe": bpe}, polytok.texts([TRAIN]), polytok.texts([VALID]), seeds=[4], **TINY)
    assert other["results"]["bpe"]["valid_bpb"] != first["valid_bpb"]


def test_seeds_give_a_mean_and_standard_error(bpe):
    options = {**TINY, "budget": 20 * 8 * 128}
    report = evaluate({"bpe": bpe}, polytok.texts([TRAIN]), polytok.texts([VALID]), seeds=3, **options)
    result = report["results"]["bpe"]
    scores = [run["valid_bpb"] for run in result["runs"]]
    assert [run["seed"] for run in result["runs"]] == [0, 1, 2]
    assert result["valid_bpb"] == pytest.approx(np.mean(scores))
    assert result["valid_bpb_stderr"] == pytest.approx(np.std(scores, ddof=1) / math.sqrt(3))


def test_a_validation_text_shorter_than_one_window_is_an_error(bpe):
    with pytest.raises(CorpusError, match=r"validation text is 17 bytes, shorter than one context window of "
                                          r"context_bytes=128: give more validation text or lower context_bytes"):
        evaluate([bpe], polytok.texts([TRAIN]), polytok.texts(["In the beginning\n"]), **TINY)


def test_an_interrupted_run_keeps_the_finished_tokenizers(bpe, tmp_path, monkeypatch):
    output = tmp_path / "lm.json"
    real_train = train.train_model
    calls = []

    def interrupt_the_second(model, windows, *arguments, **options):
        calls.append(windows.bos)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real_train(model, windows, *arguments, **options)

    monkeypatch.setattr(train, "train_model", interrupt_the_second)
    options = {**TINY, "budget": 10 * 8 * 128}
    with pytest.raises(KeyboardInterrupt):
        evaluate({"bpe": bpe, "bytes": byte_tokenizer()}, polytok.texts([TRAIN]), polytok.texts([VALID]),
                 output=output, **options)
    saved = json.loads(output.read_text())
    assert list(saved["results"]) == ["bpe"]
    assert output.with_suffix(".csv").read_text().splitlines()[1].startswith("bpe,bpe,384,")
    assert sorted(path.name for path in tmp_path.iterdir()) == ["lm.csv", "lm.json"]  # no temporary files left
