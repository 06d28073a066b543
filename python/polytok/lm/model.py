"""The language model: a small nanochat-style GPT in PyTorch.

Pre-norm decoder-only transformer: parameter-free RMSNorm before attention, before the MLP and
before the output matrix; rotary position embeddings on queries and keys, which are RMS-normalised
per head; a ReLU² MLP four times as wide as the model; no biases. The input embedding and the
output matrix are separate ("untied"), so both grow with the vocabulary, which is part of what a
larger vocabulary costs. The input embedding has one row more than the tokeniser's vocabulary: the
beginning-of-window id that every sequence starts with, which is never predicted.
"""
from __future__ import annotations

import math

try:
    import torch
    import torch.nn.functional as F
    from torch import nn
except ImportError:  # polytok.lm.evaluate asks for torch before it uses this module (require_torch)
    torch = F = nn = None

# What the model's layers derive from; `object` only where torch is missing and nothing here runs.
Module = object if nn is None else nn.Module

ROTARY_BASE = 10_000.0


def rms_norm(x: torch.Tensor) -> torch.Tensor:
    """RMSNorm without a learned scale, over the last dimension."""
    return F.rms_norm(x, (x.size(-1),))


def rotary_tables(length: int, head_dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosines and sines of rotary embeddings for positions 0..length-1, shape (length, head_dim/2)."""
    frequencies = ROTARY_BASE ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float64), frequencies)
    return angles.cos().float(), angles.sin().float()


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotary embedding of x (batch, heads, time, head_dim): each pair of halves turned by its angle."""
    half = x.size(-1) // 2
    first, second = x[..., :half], x[..., half:]
    return torch.cat((first * cos - second * sin, first * sin + second * cos), dim=-1)


class Attention(Module):
    """Causal multi-head self-attention with rotary positions and normalised queries and keys."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width, bias=False)
        self.out = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        batch, time, width = x.shape
        q, k, v = self.qkv(x).view(batch, time, 3, self.heads, width // self.heads).permute(2, 0, 3, 1, 4)
        q, k = rotate(rms_norm(q), cos, sin), rotate(rms_norm(k), cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(batch, time, width))


class MLP(Module):
    """Two matrices with a squared ReLU between them."""

    def __init__(self, width: int):
        super().__init__()
        self.up = nn.Linear(width, 4 * width, bias=False)
        self.down = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(F.relu(self.up(x)).square())


class Block(Module):
    """One pre-norm transformer layer: x + attention(norm x), then x + MLP(norm x)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attention = Attention(width, heads)
        self.mlp = MLP(width)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(rms_norm(x), cos, sin)
        return x + self.mlp(rms_norm(x))


class GPT(Module):
    """Logits over `vocab_size` tokens for each position of a (batch, time) tensor of ids; id
    `vocab_size` is the beginning-of-window id."""

    def __init__(self, vocab_size: int, depth: int, width: int, heads: int, max_length: int):
        super().__init__()
        self.vocab_size = vocab_size
        self.embedding = nn.Embedding(vocab_size + 1, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.head = nn.Linear(width, vocab_size, bias=False)
        cos, sin = rotary_tables(max_length, width // heads)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """nanochat's initialisation: unit-variance embeddings, matrices scaled by 1/sqrt(fan-in),
        and zeros for the residual branches' last matrices and the output matrix, so that an
        untrained model starts as the identity with uniform predictions (nn.init runs without
        recording gradients)."""
        nn.init.normal_(self.embedding.weight, std=1.0)
        for block in self.blocks:
            for matrix in (block.attention.qkv, block.mlp.up):
                nn.init.normal_(matrix.weight, std=1.0 / math.sqrt(matrix.in_features))
            nn.init.zeros_(block.attention.out.weight)
            nn.init.zeros_(block.mlp.down.weight)
        nn.init.zeros_(self.head.weight)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        time = ids.size(1)
        cos, sin = self.cos[:time], self.sin[:time]
        x = rms_norm(self.embedding(ids))
        for block in self.blocks:
            x = block(x, cos, sin)
        return self.head(rms_norm(x)).float()

    def matrix_parameters(self) -> int:
        """Parameters that take part in matrix products (all but the input embedding, a lookup)."""
        return sum(p.numel() for name, p in self.named_parameters() if not name.startswith("embedding"))
