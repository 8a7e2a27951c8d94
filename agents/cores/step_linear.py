"""Linear layers applied once per step inside a step loop, their weight gradients taken once
for all the steps.

The Feedback core runs each of its projections on B rows at every step. Autograd would form a
weight's gradient at every step: a (out, B) @ (B, in) product with inner size B, then a
read-modify-write of the whole (out, in) gradient, T times per call; at the paper's toy-task
sizes that traffic (about 10 MB a step) pushed the memory windows that attention reads out of
the cache. Here a step's backward returns its input's gradient only and keeps (input, output
gradient); the weight's gradient is one (out, T B) @ (T B, in) product, the bias's one sum, once
backward has passed every step (autograd runs the node that hands the weight to the steps only
after all of them). The same sums, in another order: equal to float rounding.

    linears = StepLinears(enabled=torch.is_grad_enabled())
    for t in range(T):
        y_t = linears(layer, x_t)    # layer(x_t), its weight gradient deferred
"""

from __future__ import annotations

import torch
from torch import nn


class _Deferred:
    """One layer's weight and bias as the steps of a call see them, and what their backward
    kept: each step's input (n, in) and output gradient (n, out)."""

    def __init__(self, layer: nn.Linear):
        self.inputs: list[torch.Tensor] = []
        self.grads: list[torch.Tensor] = []
        self.weight, self.bias = _HandOut.apply(layer.weight, layer.bias, self)


class _HandOut(torch.autograd.Function):
    """Identity on (weight, bias) in forward; backward (reached after every step's) returns the
    gradients of all the steps kept in `deferred`, summed by one matmul."""

    @staticmethod
    def forward(ctx, weight, bias, deferred):
        ctx.set_materialize_grads(False)  # the steps send nothing here
        ctx.deferred = deferred
        return weight.view_as(weight), bias.view_as(bias)

    @staticmethod
    def backward(ctx, _weight_grad, _bias_grad):
        deferred = ctx.deferred
        if not deferred.grads:
            return None, None, None
        inputs, grads = torch.cat(deferred.inputs), torch.cat(deferred.grads)  # (N, in), (N, out)
        deferred.inputs, deferred.grads = [], []
        return grads.T @ inputs, grads.sum(0), None


class _Step(torch.autograd.Function):
    """x (n, in) @ weight.T + bias for one step; backward returns x's gradient and keeps the rest."""

    @staticmethod
    def forward(ctx, x, weight, bias, deferred):
        ctx.save_for_backward(x, weight)
        ctx.deferred = deferred
        return torch.addmm(bias, x, weight.T)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        ctx.deferred.inputs.append(x)
        ctx.deferred.grads.append(grad)
        grad_x = grad @ weight if ctx.needs_input_grad[0] else None
        return grad_x, None, None, None


class StepLinears:
    """Calls of Linear layers within one call of a step loop: `linears(layer, x)` is
    `layer(x)`, with the layer's weight gradient deferred to one product over all steps when
    `enabled` (gradients on); a plain call otherwise."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._deferred: dict[nn.Linear, _Deferred] = {}

    def __call__(self, layer: nn.Linear, x: torch.Tensor) -> torch.Tensor:
        if not (self.enabled and layer.weight.requires_grad and layer.bias is not None):
            return layer(x)
        deferred = self._deferred.get(layer)
        if deferred is None:
            deferred = self._deferred[layer] = _Deferred(layer)
        y = _Step.apply(x.reshape(-1, x.shape[-1]), deferred.weight, deferred.bias, deferred)  # (n, out), not a view
        return y.view(*x.shape[:-1], y.shape[-1])


def plain(layer: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`layer(x)`: the StepLinears stand-in where nothing is deferred."""
    return layer(x)
