"""A stand-in model for the examples and tests: token MLP blocks with AdaLN-style
per-sample modulation from the noise level, over a packed (tokens, dim) batch.

It exists so that examples/train_dataloader.py and examples/train_stream.py show the
loader, not a model; replace it with your DiT. ``seg[i]`` is the sample of token i
(what ``cu_seqlens`` describes), so each sample gets its own scale and shift.
"""

import torch.nn as nn
import torch.nn.functional as F


class TinyDenoiser(nn.Module):
    """``forward(x, sigma, seg)``: x (tokens, dim), sigma (samples,), seg (tokens,) int64."""

    def __init__(self, dim=64, hidden=128):
        super().__init__()
        self.inp = nn.Linear(dim, hidden)
        self.norm = nn.LayerNorm(hidden, elementwise_affine=False)
        self.mod = nn.Linear(1, 2 * hidden)  # sigma -> (scale, shift) per sample
        self.out = nn.Linear(hidden, dim)

    def forward(self, x, sigma, seg):
        h = F.gelu(self.inp(x))
        scale, shift = self.mod(sigma[:, None]).chunk(2, dim=1)
        h = self.norm(h) * (1 + scale[seg]) + shift[seg]
        return self.out(h)
