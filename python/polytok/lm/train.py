"""Training one model on a tokeniser's training windows, and its validation loss.

The budget is training bytes: each seed draws the same shuffled order of windows for every
tokeniser (the windows are the same text for all of them), and training stops after the last
batch that keeps the bytes read within the budget, so every tokeniser's model reads exactly the
same text. AdamW, linear warm-up then a cosine decay to a tenth of the peak learning rate,
gradients clipped to norm 1. On the CPU every operation is deterministic
(torch.use_deterministic_algorithms), so the same seed gives the same model on the same machine
and thread count.
"""
from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import numpy as np

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # polytok.lm.evaluate asks for torch before it uses this module (require_torch)
    torch = F = None

from polytok.lm.data import IGNORED, Windows
from polytok.lm.model import GPT
from polytok.progress import progress_bar

FINAL_LEARNING_RATE_FRACTION = 0.1
GRADIENT_CLIP = 1.0
ADAM_BETAS = (0.9, 0.95)


@dataclass(frozen=True)
class Settings:
    """The hyperparameters, the same for every tokeniser and vocabulary size."""

    budget: int
    depth: int
    width: int
    heads: int
    batch_size: int
    learning_rate: float
    weight_decay: float
    warmup: float
    log_every: int | None


def batch_order(windows: Windows, settings: Settings, seed: int) -> np.ndarray:
    """Window indices of every training batch (steps × batch_size): shuffled epochs from `seed`,
    as many batches as fit in the byte budget."""
    generator = np.random.default_rng(seed)
    # Every epoch reads all the text; one more than the budget needs covers the last batch.
    epochs = settings.budget // windows.bytes + 2
    order = np.concatenate([generator.permutation(len(windows)) for _ in range(epochs)])
    batches = order[: len(order) // settings.batch_size * settings.batch_size].reshape(-1, settings.batch_size)
    read = np.cumsum(windows.window_bytes[batches].sum(axis=1))
    return batches[: int(np.searchsorted(read, settings.budget, side="right"))]


def learning_rate_factor(step: int, steps: int, warmup: float) -> float:
    """Linear warm-up over the first `warmup` fraction of the steps, then a cosine decay to
    FINAL_LEARNING_RATE_FRACTION."""
    warmup_steps = max(1, round(warmup * steps))
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    progress = (step - warmup_steps) / max(1, steps - warmup_steps)
    return FINAL_LEARNING_RATE_FRACTION + (1 - FINAL_LEARNING_RATE_FRACTION) * 0.5 * (1 + math.cos(math.pi * progress))


@contextlib.contextmanager
def reproducible(device: torch.device, seed: int) -> Iterator[None]:
    """Deterministic algorithms on the CPU and the random state seeded with `seed`, both restored
    afterwards so that the caller's torch settings are left as they were."""
    previous = torch.are_deterministic_algorithms_enabled()
    devices = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        if device.type == "cpu":
            torch.use_deterministic_algorithms(True)
        try:
            yield
        finally:
            torch.use_deterministic_algorithms(previous)


def new_model(vocab_size: int, max_length: int, settings: Settings, device: torch.device) -> GPT:
    """An initialised model on `device` (its initialisation draws from torch's random state)."""
    return GPT(vocab_size, settings.depth, settings.width, settings.heads, max_length).to(device)


def optimizer_for(model: GPT, settings: Settings) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not the input embedding)."""
    matrices = [p for name, p in model.named_parameters() if not name.startswith("embedding")]
    others = [p for name, p in model.named_parameters() if name.startswith("embedding")]
    groups = [{"params": matrices, "weight_decay": settings.weight_decay}, {"params": others, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=settings.learning_rate, betas=ADAM_BETAS)


def train_model(
    model: GPT, windows: Windows, order: np.ndarray, settings: Settings, device: torch.device,
    progress: bool, label: str,
) -> dict[str, Any]:
    """Train `model` on the batches of `order`; the loss curve, averaged over every `log_every`
    steps: loss in nats per token and in bits per byte of the batches read."""
    optimizer = optimizer_for(model, settings)
    steps = len(order)
    log_every = settings.log_every or max(1, steps // 50)
    curve: dict[str, list] = {"step": [], "train_bytes": [], "loss": [], "bpb": []}
    interval_nats = torch.zeros((), dtype=torch.float64, device=device)
    interval_tokens = interval_bytes = read_bytes = read_tokens = 0
    model.train()
    started = time.perf_counter()
    with progress_bar(progress, total=steps, desc=label, unit="step") as bar:
        for step, indices in enumerate(order):
            for group in optimizer.param_groups:
                group["lr"] = settings.learning_rate * learning_rate_factor(step, steps, settings.warmup)
            inputs, targets = windows.batch(indices)
            targets_tensor = torch.from_numpy(targets).to(device)
            logits = model(torch.from_numpy(inputs).to(device))
            loss = F.cross_entropy(logits.flatten(0, 1), targets_tensor.flatten(), ignore_index=IGNORED)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), GRADIENT_CLIP)
            optimizer.step()

            tokens = int((targets != IGNORED).sum())
            batch_bytes = int(windows.window_bytes[indices].sum())
            interval_nats += loss.detach().double() * tokens
            interval_tokens += tokens
            interval_bytes += batch_bytes
            read_tokens += tokens
            read_bytes += batch_bytes
            bar.update()
            if (step + 1) % log_every == 0 or step + 1 == steps:
                nats = float(interval_nats)
                curve["step"].append(step + 1)
                curve["train_bytes"].append(read_bytes)
                curve["loss"].append(nats / interval_tokens)
                curve["bpb"].append(nats / math.log(2) / interval_bytes)
                bar.set_postfix(loss=f"{curve['loss'][-1]:.3f}")
                interval_nats.zero_()
                interval_tokens = interval_bytes = 0
    return {
        "steps": steps,
        "train_bytes": read_bytes,
        "train_tokens": read_tokens,
        "train_seconds": time.perf_counter() - started,
        "curve": curve,
    }


def validation_nats(model: Callable[[torch.Tensor], torch.Tensor], windows: Windows, batch_size: int,
                    device: torch.device) -> float:
    """Total negative log-likelihood, in nats, of every token of every window; `model` maps
    (batch, time) ids to (batch, time, vocabulary) logits."""
    if isinstance(model, torch.nn.Module):
        model.eval()
    total = 0.0
    with torch.no_grad():
        for first in range(0, len(windows), batch_size):
            inputs, targets = windows.batch(np.arange(first, min(first + batch_size, len(windows))))
            logits = model(torch.from_numpy(inputs).to(device))
            losses = F.cross_entropy(logits.flatten(0, 1).float(), torch.from_numpy(targets).to(device).flatten(),
                                     ignore_index=IGNORED, reduction="none")
            total += float(losses.double().sum())
    return total


def bits_per_byte(nats: float, text_bytes: int) -> float:
    """A total loss in nats as bits per byte of the text it covers."""
    return nats / math.log(2) / text_bytes


def flops_per_token(model: GPT, settings: Settings, mean_window_tokens: float) -> float:
    """Training FLOPs per token, forward and backward: 6 per matrix parameter plus attention's
    12 × depth × width × context tokens (nanochat's estimate)."""
    return 6.0 * model.matrix_parameters() + 12.0 * settings.depth * settings.width * mean_window_tokens
