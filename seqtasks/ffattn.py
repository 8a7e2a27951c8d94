"""Feed-forward attention (Raffel & Ellis): a sequence embedded by one attention-weighted mean.

    h_t = ReLU(W_xh x_t + b_xh)          (B, L, D) per step, no recurrence
    e_t = tanh(w_hc . h_t + b_hc)        (B, L)    one score per step
    alpha = softmax_t(e)                 over the sequence's own steps (padding masked)
    c = sum_t alpha_t h_t                (B, D)    or, for `mean`, the plain mean of h
    s = ReLU(W_cs c + b_cs)              (B, D)
    y = ReLU(w_sy . s + b_sy)            (B,)
Weights use He initialisation, biases start at 0 except b_sy, which starts at the task's mean
target (0.5 adding and XOR, 0.25 multiplication), as in the paper. D = 100 there.

Letters: B sequences, L steps (the longest; shorter ones are left-padded), C input channels,
D hidden width.
"""

from __future__ import annotations

import torch
from torch import nn


def _he(layer: nn.Linear) -> nn.Linear:
    nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
    nn.init.zeros_(layer.bias)
    return layer


class FeedForwardAttention(nn.Module):
    def __init__(self, input_dim: int, hidden: int, mean_target: float, attention: bool = True):
        super().__init__()
        self.attention = attention
        self.step = _he(nn.Linear(input_dim, hidden))
        self.score = _he(nn.Linear(hidden, 1)) if attention else None
        self.hidden = _he(nn.Linear(hidden, hidden))
        self.out = _he(nn.Linear(hidden, 1))
        nn.init.constant_(self.out.bias, mean_target)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """x: (B, L, C) left-padded, lengths: (B,) -> predictions (B,)."""
        steps = x.shape[1]
        real = torch.arange(steps, device=x.device)[None, :] >= (steps - lengths)[:, None]  # (B, L)
        h = torch.relu(self.step(x))  # (B, L, D)
        if self.attention:
            e = torch.tanh(self.score(h)).squeeze(-1)  # (B, L)
            alpha = torch.softmax(e.masked_fill(~real, float("-inf")), dim=1)
        else:
            alpha = real / lengths[:, None]
        c = (alpha[:, :, None] * h).sum(dim=1)  # (B, D)
        return torch.relu(self.out(torch.relu(self.hidden(c)))).squeeze(-1)
