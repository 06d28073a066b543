"""Language-model evaluation of tokenisers (`polytok.lm.evaluate`): one small GPT trained per
tokeniser on the same text with the same hyperparameters, compared by validation bits per byte.

Bits per byte (BpB) is the model's total negative log-likelihood of the validation text, in bits,
over the text's bytes: unlike a loss per token it does not depend on how many tokens a tokeniser
cuts the text into, so tokenisers with different vocabularies compare directly. The budget is
equal across tokenisers in training bytes (never tokens), and the context is a window of bytes,
so every model reads and predicts the same text. PyTorch comes with the `lm` extra:
`pip install 'polytok[lm]'`. docs/lm.md describes the protocol and its limits.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

from polytok import checks
from polytok.errors import ConfigError, CorpusError
from polytok.files import atomic_write
from polytok.compare import named_tokenizers
from polytok.metrics import TokenizerView
from polytok.tables import to_csv

#: The columns of the CSV summary, one row per tokeniser.
CSV_FIELDS = (
    "tokenizer", "family", "vocab_size", "valid_bpb", "valid_bpb_stderr", "seeds", "uniform_bpb",
    "valid_tokens_per_byte", "train_tokens_per_byte", "parameters", "matrix_parameters", "train_bytes",
    "train_flops", "train_seconds",
)

DEVICES = ("auto", "cpu", "cuda")


def require_torch() -> Any:
    """The torch module, or a ConfigError saying how to install it."""
    try:
        import torch
    except ImportError:
        raise ConfigError(
            "language-model evaluation needs PyTorch, which is not installed: pip install 'polytok[lm]' "
            "(or pip install torch)"
        ) from None
    return torch


def evaluate(
    tokenizers: Mapping[str, Any] | Sequence[Any],
    train_corpus: Any,
    valid_corpus: Any,
    *,
    budget: int,
    depth: int = 2,
    width: int | None = None,
    heads: int | None = None,
    context_bytes: int = 512,
    batch_size: int = 16,
    seeds: int | Sequence[int] = 1,
    learning_rate: float = 3e-3,
    weight_decay: float = 0.1,
    warmup: float = 0.05,
    device: str = "auto",
    log_every: int | None = None,
    output: str | os.PathLike | None = None,
    num_threads: int | None = None,
    torch_threads: int | None = None,
    progress: bool = True,
    **corpus_reader_options: Any,
) -> dict[str, Any]:
    """Train one GPT per tokeniser and seed on `train_corpus` for `budget` training bytes and
    report validation bits per byte on `valid_corpus`, with its standard error across seeds.

    `depth` layers of `width` (default 64 × depth) in `heads` heads (default width / 64);
    `context_bytes` bytes of text per sequence; `seeds` a count or a list of seeds. `device`
    "auto" takes a GPU when torch sees one. With `output` (a .json path) the results so far are
    written after every tokeniser, with a CSV summary beside it, so an interrupted run keeps the
    tokenisers already finished. Corpora are anything `polytok.count` reads. `num_threads` is the
    encoder's threads, `torch_threads` torch's (default: torch's own; a small model on a busy
    machine trains fastest on 1).
    """
    named = _named(tokenizers)
    seed_list = _seeds(seeds)
    width = 64 * depth if width is None else width
    heads = max(1, width // 64) if heads is None else heads
    _check_options(budget=budget, depth=depth, width=width, heads=heads, context_bytes=context_bytes,
                   batch_size=batch_size, learning_rate=learning_rate, weight_decay=weight_decay, warmup=warmup,
                   device=device)
    if budget < batch_size * context_bytes:
        raise ConfigError(
            f"budget={budget:,} training bytes is less than one step, batch_size × context_bytes = "
            f"{batch_size} × {context_bytes} = {batch_size * context_bytes:,} bytes: raise the budget or "
            "lower batch_size or context_bytes"
        )
    checks.optional_integer("torch_threads", torch_threads)
    output = _check_output(output)
    torch = require_torch()
    with _torch_threads(torch, torch_threads):
        from polytok.lm import train
        from polytok.lm.data import encode_windows, read_corpus, window_offsets

        train_text = read_corpus(train_corpus, "training", corpus_reader_options)
        valid_text = read_corpus(valid_corpus, "validation", corpus_reader_options)
        if len(valid_text) < context_bytes:
            raise CorpusError(
                f"the validation text is {len(valid_text):,} bytes, shorter than one context window of "
                f"context_bytes={context_bytes:,}: give more validation text or lower context_bytes"
            )
        train_offsets, valid_offsets = window_offsets(train_text, context_bytes), window_offsets(valid_text, context_bytes)
        chosen = _device(torch, device)
        settings = train.Settings(budget=budget, depth=depth, width=width, heads=heads, batch_size=batch_size,
                                  learning_rate=learning_rate, weight_decay=weight_decay, warmup=warmup,
                                  log_every=log_every)
        report: dict[str, Any] = {
            "settings": {
                "budget_bytes": budget, "depth": depth, "width": width, "heads": heads,
                "context_bytes": context_bytes, "batch_size": batch_size, "seeds": seed_list,
                "learning_rate": learning_rate, "weight_decay": weight_decay, "warmup": warmup,
                "device": str(chosen), "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
                "train_bytes_available": len(train_text), "valid_bytes": len(valid_text),
                "train_windows": len(train_offsets) - 1, "valid_windows": len(valid_offsets) - 1,
            },
            "results": {},
        }
        for name, tokenizer in named.items():
            train_windows = encode_windows(tokenizer, train_text, train_offsets, num_threads, "training")
            valid_windows = encode_windows(tokenizer, valid_text, valid_offsets, num_threads, "validation")
            runs = [_run(train, settings, chosen, train_windows, valid_windows, seed, progress, f"{name} seed {seed}")
                    for seed in seed_list]
            report["results"][name] = _summary(tokenizer, train_windows, valid_windows, runs)
            if output is not None:
                write_results(report, output)
        return report


def _run(train: Any, settings: Any, device: Any, train_windows: Any, valid_windows: Any, seed: int, progress: bool,
         label: str) -> dict[str, Any]:
    """Train one model from `seed` and score it on the validation windows."""
    max_length = int(max(train_windows.lengths.max(), valid_windows.lengths.max()))
    with train.reproducible(device, seed):
        model = train.new_model(train_windows.bos, max_length, settings, device)
        order = train.batch_order(train_windows, settings, seed)
        run = train.train_model(model, train_windows, order, settings, device, progress, label)
        started = time.perf_counter()
        nats = train.validation_nats(model, valid_windows, settings.batch_size, device)
    return {
        "seed": seed,
        "valid_bpb": train.bits_per_byte(nats, valid_windows.bytes),
        "valid_loss": nats / valid_windows.tokens,
        "valid_seconds": time.perf_counter() - started,
        "parameters": sum(p.numel() for p in model.parameters()),
        "matrix_parameters": model.matrix_parameters(),
        **run,
        "train_flops": run["train_tokens"] * train.flops_per_token(model, settings,
                                                                   train_windows.tokens / len(train_windows)),
    }


@contextlib.contextmanager
def _torch_threads(torch: Any, threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to `threads` (None: left as they are), restored afterwards."""
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def _summary(tokenizer: Any, train_windows: Any, valid_windows: Any, runs: list[dict]) -> dict[str, Any]:
    """One tokeniser's numbers: mean BpB over the seeds with its standard error, and each run."""
    scores = [run["valid_bpb"] for run in runs]
    vocab_size = train_windows.bos
    return {
        "family": family(tokenizer),
        "vocab_size": vocab_size,
        "valid_bpb": statistics.fmean(scores),
        "valid_bpb_stderr": statistics.stdev(scores) / math.sqrt(len(scores)) if len(scores) > 1 else None,
        "seeds": len(runs),
        "uniform_bpb": valid_windows.tokens * math.log2(vocab_size) / valid_windows.bytes,
        "valid_tokens_per_byte": valid_windows.tokens / valid_windows.bytes,
        "train_tokens_per_byte": train_windows.tokens / train_windows.bytes,
        "parameters": runs[0]["parameters"],
        "matrix_parameters": runs[0]["matrix_parameters"],
        "train_bytes": runs[0]["train_bytes"],
        "train_flops": statistics.fmean(run["train_flops"] for run in runs),
        "train_seconds": sum(run["train_seconds"] for run in runs),
        "runs": runs,
    }


def family(tokenizer: Any) -> str:
    """What a BpB-vs-vocabulary plot joins into one line: the algorithm, with ConvexTok's rounding."""
    algorithm = getattr(tokenizer, "algorithm", None) or type(tokenizer).__name__
    training = getattr(tokenizer, "training", None)
    rounding = training.get("rounding") if isinstance(training, dict) else None
    return f"{algorithm}-{rounding}" if rounding else str(algorithm)


def summary_rows(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per tokeniser with the CSV_FIELDS."""
    return [{"tokenizer": name, **result} for name, result in report["results"].items()]


def write_results(report: Mapping[str, Any], path: str | os.PathLike) -> list[Path]:
    """Write the results as JSON at `path` (a .json file) and the summary as CSV beside it; each
    file appears whole or not at all."""
    path = Path(path)
    outputs = [path, path.with_suffix(".csv")]
    contents = [json.dumps(report, indent=2) + "\n", to_csv(summary_rows(report), CSV_FIELDS)]
    for target, content in zip(outputs, contents):
        with atomic_write(target) as stream:
            stream.write(content)
    return outputs


def _named(tokenizers: Mapping[str, Any] | Sequence[Any] | Iterable[Any]) -> dict[str, Any]:
    named = named_tokenizers(tokenizers, purpose="evaluate")
    for name, tokenizer in named.items():
        TokenizerView(tokenizer)  # a ConfigError now, not after another tokeniser's training
    return named


def _seeds(seeds: int | Sequence[int]) -> list[int]:
    if isinstance(seeds, bool):
        raise ConfigError(f"seeds={seeds!r}; expected a count of seeds or a list of integer seeds")
    if isinstance(seeds, int):
        if seeds < 1:
            raise ConfigError(f"seeds={seeds}; need at least one seed")
        return list(range(seeds))
    seed_list = list(seeds)
    if not seed_list or not all(checks.is_integer(seed) and seed >= 0 for seed in seed_list):
        raise ConfigError(f"seeds={seeds!r}; expected a count of seeds or a non-empty list of integers ≥ 0")
    if len(set(seed_list)) != len(seed_list):
        raise ConfigError(f"seeds={seed_list}: each seed once (a repeated seed repeats the same run)")
    return seed_list


def _check_options(**options: Any) -> None:
    for name in ("budget", "depth", "width", "heads", "context_bytes", "batch_size"):
        checks.integer(name, options[name])
    if options["context_bytes"] < 4:
        raise ConfigError(f"context_bytes={options['context_bytes']}; a window must hold at least 4 bytes, "
                          "the longest UTF-8 character")
    if options["width"] % options["heads"] or (options["width"] // options["heads"]) % 2:
        raise ConfigError(
            f"width={options['width']} and heads={options['heads']}: the width must split into heads of an "
            "even size (rotary embeddings turn pairs of dimensions)"
        )
    if not options["learning_rate"] > 0:
        raise ConfigError(f"learning_rate={options['learning_rate']!r}; expected a positive number")
    if not options["weight_decay"] >= 0:
        raise ConfigError(f"weight_decay={options['weight_decay']!r}; expected a number ≥ 0")
    if not 0 <= options["warmup"] < 1:
        raise ConfigError(f"warmup={options['warmup']!r}; expected a fraction of the steps in [0, 1)")
    if options["device"] not in DEVICES and not str(options["device"]).startswith("cuda:"):
        raise ConfigError(f"device={options['device']!r}; expected one of {', '.join(DEVICES)} or cuda:N")


def _check_output(output: str | os.PathLike | None) -> Path | None:
    if output is None:
        return None
    path = Path(output)
    if path.suffix.lower() != ".json":
        raise ConfigError(f"output {path} should end in .json (the CSV summary goes beside it)")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: directory {path.parent} does not exist")
    return path


def _device(torch: Any, device: str) -> Any:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} but torch sees no CUDA GPU: use device='cpu' or 'auto'")
    return torch.device(device)
